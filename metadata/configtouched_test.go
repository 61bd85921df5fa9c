package metadata

import "testing"

// A broker config written with the value it had still counts as touched
// (brokers reload a keystore rewritten in place on it); another
// resource's record, or none, does not.
func TestConfigTouched(t *testing.T) {
	b1 := ConfigResource{Type: ConfigResourceBroker, Name: "1"}
	b2 := ConfigResource{Type: ConfigResourceBroker, Name: "2"}
	set := func(res ConfigResource, k, v string) Record {
		return &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: k, Value: &v}
	}
	apply := func(base *Image, recs ...Record) *Image {
		t.Helper()
		img, err := ApplyBatch(base, recs, base.Offset+1, 1)
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	img0 := &Image{}
	img1 := apply(img0, set(b1, "listener.name.ssl.ssl.keystore.location", "/a"))
	if !img1.ConfigTouched(img0, b1) || img1.ConfigTouched(img0, b2) {
		t.Error("a first record: touched wrongly reported")
	}
	if !img1.ConfigTouched(nil, b2) {
		t.Error("the first image does not count as touching")
	}
	same := apply(img1, set(b1, "listener.name.ssl.ssl.keystore.location", "/a"))
	if !same.ConfigTouched(img1, b1) {
		t.Error("a record setting the same value is not seen")
	}
	other := apply(same, set(b2, "log.cleaner.threads", "2"))
	if other.ConfigTouched(same, b1) || !other.ConfigTouched(same, b2) {
		t.Error("another resource's record is seen as touching this one")
	}
	none := apply(other, &FeatureLevelRecord{Name: "group.version", FeatureLevel: 1})
	if none.ConfigTouched(other, b1) || none.ConfigTouched(other, b2) {
		t.Error("an image without config records touched configs")
	}
	deleted := apply(none, &ConfigRecord{ResourceType: b2.Type, ResourceName: b2.Name, Name: "log.cleaner.threads"})
	if !deleted.ConfigTouched(none, b2) {
		t.Error("deleting a resource's last config is not seen")
	}
}
