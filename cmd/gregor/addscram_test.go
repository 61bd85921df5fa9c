package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/gregorbroker/gregor/vfs"
)

func TestParseAddScram(t *testing.T) {
	rec, err := parseAddScram(`SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]`)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sasl.ScramByName(sasl.ScramSHA512)
	want := decide.NewUserScramCredentialRecord("alice", m, []byte("7q"), []byte{0x60, 0x21}, 8192)
	if rec.Name != "alice" || rec.Mechanism != 2 || rec.Iterations != 8192 || !bytes.Equal(rec.Salt, want.Salt) ||
		!bytes.Equal(rec.StoredKey, want.StoredKey) || !bytes.Equal(rec.ServerKey, want.ServerKey) {
		t.Fatalf("record %+v, want %+v", rec, want)
	}
	rec, err = parseAddScram(" SCRAM-SHA-256=[name=admin,password=admin-secret] ")
	if err != nil || rec.Iterations != 4096 || rec.Mechanism != 1 || len(rec.Salt) == 0 {
		t.Fatalf("%+v %v", rec, err)
	}
	s256, _ := sasl.ScramByName(sasl.ScramSHA256)
	if got := s256.Credential(rec.Salt, s256.SaltedPassword("admin-secret", rec.Salt, 4096), 4096); !bytes.Equal(got.StoredKey, rec.StoredKey) {
		t.Fatal("the stored key is not the password's")
	}
	for arg, want := range map[string]string{
		"SCRAM-SHA-256":                                      "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'",
		"SCRAM-SHA-1=[name=a,password=b]":                    "The add-scram mechanism SCRAM-SHA-1 is not supported.",
		"SCRAM-SHA-256=name=a,password=b]":                   "Expected configuration string to start with [",
		"SCRAM-SHA-256=[name=a,password=b":                   "Expected configuration string to end with ]",
		"SCRAM-SHA-256=[password=b]":                         "You must supply 'name' to add-scram",
		"SCRAM-SHA-256=[name=a]":                             "You must supply one of 'password' or 'saltedpassword' to add-scram",
		"SCRAM-SHA-256=[name=a,saltedpassword=YCE=]":         "You must supply 'salt' with 'saltedpassword' to add-scram",
		"SCRAM-SHA-256=[name=a,password=b,iterations=4095]":  "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-256",
		"SCRAM-SHA-256=[name=a,password=b,iterations=16385]": "The 'iterations' value must be <= 16384 for add-scram using SCRAM-SHA-256",
		"SCRAM-SHA-256=[name=a,password=b,iterations=x]":     "Failed to parse iterations count: x",
		"SCRAM-SHA-256=[name=a,password=b,salt=%%]":          "Failed to decode given salt: %%",
		"SCRAM-SHA-256=[name=a,password=b,colour=red]":       "Unknown SCRAM configurations: colour",
		"SCRAM-SHA-256=[name=a,password]":                    "No equals sign found in SCRAM component: password",
	} {
		if _, err := parseAddScram(arg); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", arg, err, want)
		}
	}
}

func TestStorageFormatAddScram(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	os.WriteFile(props, []byte("process.roles=broker,controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=127.0.0.1:19093\n"+
		"listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\nlog.dirs="+dir+"/data\n"), 0o644)
	var out, errOut strings.Builder
	code := storageCommand([]string{"format", "--config", props, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--standalone",
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]", "-S", "SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("format: %d %s", code, errOut.String())
	}
	info, err := controller.ReadFormat(vfs.OSFS{}, dir+"/data")
	if err != nil || len(info.ScramCredentials) != 2 {
		t.Fatalf("%+v %v", info.ScramCredentials, err)
	}
	if c := info.ScramCredentials[1]; c.Name != "admin" || c.Mechanism != 2 || c.Iterations != 8192 {
		t.Fatalf("admin %+v", c)
	}
	code = storageCommand([]string{"format", "--config", props, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--standalone",
		"--ignore-formatted", "--add-scram", "SCRAM-SHA-256=[name=alice]"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "You must supply one of 'password' or 'saltedpassword'") {
		t.Fatalf("bad --add-scram: %d %s", code, errOut.String())
	}
}
