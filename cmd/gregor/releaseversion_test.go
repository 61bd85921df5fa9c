package main

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/vfs"
)

// TestStorageFormatReleaseVersion: --release-version bootstraps that
// release's metadata.version and feature levels (as kafka-features
// version-mapping lists them, share and streams aside), --feature sets a
// level on top within the dependencies, and what Gregor cannot run is
// refused with a message.
func TestStorageFormatReleaseVersion(t *testing.T) {
	format := func(args ...string) (code int, stdout, stderr string, features map[string]int16) {
		dir := t.TempDir()
		props := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(props, []byte("process.roles=broker,controller\nnode.id=1\ncontroller.quorum.bootstrap.servers=127.0.0.1:19093\n"+
			"listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\nlog.dirs="+dir+"/data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var out, errOut strings.Builder
		code = storageCommand(append([]string{"format", "--config", props, "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--standalone"}, args...), &out, &errOut)
		if code == 0 {
			info, err := controller.ReadFormat(vfs.OSFS{}, dir+"/data")
			if err != nil {
				t.Fatal(err)
			}
			features = info.Features
		}
		return code, out.String(), errOut.String(), features
	}
	for _, c := range []struct {
		args    []string
		printed string
		want    map[string]int16
	}{
		{nil, "metadata.version 4.3-IV0.", map[string]int16{"metadata.version": 30, "kraft.version": 1, "group.version": 1, "transaction.version": 2, "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1}},
		{[]string{"-r", "4.2-IV0"}, "metadata.version 4.2-IV0.", map[string]int16{"metadata.version": 28, "kraft.version": 1, "group.version": 1, "transaction.version": 2, "eligible.leader.replicas.version": 1, "share.version": 1}},
		{[]string{"--release-version", "3.9"}, "metadata.version 3.9-IV0.", map[string]int16{"metadata.version": 21, "kraft.version": 1}},
		{[]string{"-r", "4.0"}, "metadata.version 4.0-IV3.", map[string]int16{"metadata.version": 25, "kraft.version": 1, "group.version": 1, "transaction.version": 2}},
		{[]string{"--release-version", "4.0-IV1", "--feature", "eligible.leader.replicas.version=1", "--feature", "transaction.version=1"}, "metadata.version 4.0-IV1.",
			map[string]int16{"metadata.version": 23, "kraft.version": 1, "group.version": 1, "transaction.version": 1, "eligible.leader.replicas.version": 1}},
	} {
		code, stdout, stderr, features := format(c.args...)
		if code != 0 || !strings.Contains(stdout, c.printed) {
			t.Fatalf("%v: exit %d, printed %q %q", c.args, code, stdout, stderr)
		}
		for name, level := range features {
			if level == 0 {
				delete(features, name)
			}
		}
		if !maps.Equal(features, c.want) {
			t.Errorf("%v: bootstrap features %v, want %v", c.args, features, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--release-version", "3.8"}, "unsupported release version 3.8: Gregor bootstraps metadata.version 3.9-IV0 to 4.3-IV0"},
		{[]string{"--release-version", "4.4-IV0"}, "unsupported release version 4.4-IV0"},
		{[]string{"--release-version", "3.9", "--feature", "eligible.leader.replicas.version=1"},
			"eligible.leader.replicas.version 1 requires metadata.version at least 4.0-IV1 (23), and it would be 3.9-IV0 (21)."},
		{[]string{"--feature", "metadata.version=21"}, "metadata.version cannot be set with --feature; use --release-version"},
	} {
		if code, _, stderr, _ := format(c.args...); code != 1 || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, %q; want exit 1 and %q", c.args, code, stderr, c.msg)
		}
	}
}
