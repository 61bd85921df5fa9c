package integration

import (
	"slices"
	"testing"
)

// regLog writes records as a registry would, at consecutive offsets.
type regLog []regRecord

func (l *regLog) add(key, value []byte) {
	*l = append(*l, regRecord{Offset: int64(len(*l)), Key: key, Value: value})
}

func (l *regLog) schema(subject string, version, id int, schema string, deleted bool) {
	l.add(schemaKey(subject, version), mustJSON(regSchemaValue{Subject: subject, Version: version, ID: id, Schema: schema, Deleted: deleted}))
}

// The scenario compares a registry's state before and after compaction;
// that is a test of the broker only if the state machine gives the same
// state for a log and for its compaction, with tombstones kept or gone.
func TestRegistryStateSurvivesCompaction(t *testing.T) {
	var l regLog
	l.add(configKey(""), mustJSON(regConfigValue{CompatibilityLevel: "FULL"}))
	l.schema("a", 1, 1, "s1", false)
	l.schema("b", 1, 1, "s1", false)
	l.schema("a", 2, 2, "s2", false)
	l.add(configKey("a"), mustJSON(regConfigValue{CompatibilityLevel: "NONE"}))
	l.schema("a", 1, 1, "s1", true) // DELETE /subjects/a/versions/1
	l.schema("c", 1, 3, "s3", false)
	l.schema("c", 2, 4, "s4", false)
	l.add(deleteSubjectKey("c"), mustJSON(regDeleteSubjectValue{Subject: "c", Version: 2}))
	l.schema("c", 3, 5, "s5", false) // registered again after the soft delete
	l.schema("d", 1, 6, "s6", false)
	l.add(configKey("d"), mustJSON(regConfigValue{CompatibilityLevel: "FORWARD"}))
	l.add(deleteSubjectKey("d"), mustJSON(regDeleteSubjectValue{Subject: "d", Version: 1}))
	l.add(schemaKey("d", 1), nil) // DELETE /subjects/d?permanent=true
	l.add(deleteSubjectKey("d"), nil)
	l.add(configKey("d"), nil)
	l.schema("d", 1, 1, "s1", false) // registered again from version 1
	l.add(configKey(""), mustJSON(regConfigValue{CompatibilityLevel: "NONE"}))
	l.add(configKey("a"), nil)

	full, err := replayState(l)
	if err != nil {
		t.Fatal(err)
	}
	want := full.snapshot()
	if !slices.Equal(want.Subjects, []string{"a", "b", "c", "d"}) || want.GlobalConfig != "NONE" || len(want.Configs) != 0 {
		t.Fatalf("subjects %v, global %s, configs %v", want.Subjects, want.GlobalConfig, want.Configs)
	}
	if !slices.Equal(want.Versions["c"], []int{3}) || !slices.Equal(want.AllVersions["c"], []int{1, 2, 3}) || !slices.Equal(want.Versions["a"], []int{2}) {
		t.Fatalf("versions %v, with deleted %v", want.Versions, want.AllVersions)
	}
	if want.Schemas["d/1"] != (regVersion{ID: 1, Schema: "s1"}) || len(want.SchemasByID) != 5 || len(want.conflicts()) != 0 {
		t.Fatalf("d/1 %+v, ids %v", want.Schemas["d/1"], want.SchemasByID)
	}

	// Compacted with the tombstones still there: the last record of each
	// key, in offset order.
	var kept []regRecord
	latest := latestByKey(l)
	for _, rec := range l {
		if latest[string(rec.Key)].Offset == rec.Offset {
			kept = append(kept, rec)
		}
	}
	for name, log := range map[string][]regRecord{"tombstones kept": kept, "tombstones expired": compactedLog(l)} {
		st, err := replayState(log)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d := firstDifference(want.text(), st.snapshot().text()); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}

	// The scenario's check of a scan: a superseded record is pending, a
	// record not written is fatal, a missing latest value is fatal.
	if fatal, pending := checkRegistryCompacted(l, l, ""); fatal != nil || pending == nil {
		t.Errorf("uncompacted log: fatal %v, pending %v", fatal, pending)
	}
	if fatal, pending := checkRegistryCompacted(compactedLog(l), l, ""); fatal != nil || pending != nil {
		t.Errorf("compacted log: fatal %v, pending %v", fatal, pending)
	}
	lost := compactedLog(l)[1:]
	if fatal, _ := checkRegistryCompacted(lost, l, ""); fatal == nil {
		t.Error("a scan without a key's latest value passed")
	}
	bad := slices.Clone(compactedLog(l))
	bad[0].Value = []byte(`{}`)
	if fatal, _ := checkRegistryCompacted(bad, l, ""); fatal == nil {
		t.Error("a scan with a value that was not written passed")
	}
}
