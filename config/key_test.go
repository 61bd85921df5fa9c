package config

import (
	"math"
	"reflect"
	"testing"
)

func TestFormatJavaDouble(t *testing.T) {
	cases := map[float64]string{
		0.5: "0.5", 1: "1.0", 0.9: "0.9", 0.05: "0.05", 1e7: "1.0E7", 1.5e-4: "1.5E-4",
		math.MaxFloat64: "1.7976931348623157E308", 0.001: "0.001", 1234567.5: "1234567.5", -2: "-2.0",
	}
	for f, want := range cases {
		if got := FormatJavaDouble(f); got != want {
			t.Errorf("FormatJavaDouble(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestParseConfigValueJavaRules(t *testing.T) {
	cases := []struct {
		typ  Type
		raw  string
		want any
		bad  bool
	}{
		{TypeInt, " +42 ", int32(42), false},
		{TypeInt, "0x10", nil, true},
		{TypeInt, "1_000", nil, true},
		{TypeShort, "40000", nil, true},
		{TypeLong, "9223372036854775807", int64(math.MaxInt64), false},
		{TypeDouble, "1e3", 1000.0, false},
		{TypeDouble, "2.5d", 2.5, false},
		{TypeDouble, "inf", nil, true},
		{TypeBoolean, " False ", false, false},
		{TypeList, "  ", []string{}, false},
		{TypeList, "a , b,c", []string{"a", "b", "c"}, false},
		{TypeString, "  x y  ", "x y", false},
	}
	for _, tc := range cases {
		got, err := ParseValue("k", tc.typ, tc.raw)
		if tc.bad {
			if err == nil {
				t.Errorf("%v %q: accepted as %v", tc.typ, tc.raw, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v %q: got %v, %v; want %v", tc.typ, tc.raw, got, err, tc.want)
		}
	}
}
