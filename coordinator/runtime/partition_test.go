package runtime

import "testing"

// Coordinator keys map to partitions as in Kafka, whose clients compute
// the same mapping (and tools print it).
func TestPartitionForMatchesJava(t *testing.T) {
	tests := []struct {
		key  string
		hash int32 // Java's String.hashCode
		n    int32
		want int32
	}{
		{"", 0, 50, 0},
		{"a", 97, 50, 47},
		{"hello", 99162322, 50, 22},
		{"console-consumer-12345", javaStringHash("console-consumer-12345"), 50, -1},
		// hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
		{"polygenelubricants", -2147483648, 50, 0},
		// Outside the BMP: two UTF-16 code units.
		{"😀", 31*0xD83D + 0xDE00, 50, 49},
	}
	for _, tc := range tests {
		if h := javaStringHash(tc.key); h != tc.hash {
			t.Errorf("hash(%q) = %d, want %d", tc.key, h, tc.hash)
		}
		if tc.want >= 0 {
			if p := PartitionFor(tc.key, tc.n); p != tc.want {
				t.Errorf("PartitionFor(%q) = %d, want %d", tc.key, p, tc.want)
			}
		}
	}
	// A negative hash: abs then mod.
	if p := PartitionFor("Aa-negative-hash-group-xyz", 50); p < 0 || p >= 50 {
		t.Fatalf("partition %d out of range", p)
	}
}
