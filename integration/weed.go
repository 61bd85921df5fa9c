package integration

// SeaweedFS's S3 gateway: the S3-compatible server tiered storage's S3
// backend is tested against. It is built from its Go module (the module
// proxy is the one registry it comes from) and started on loopback, a
// server of its own, not an in-process mock.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// WeedModuleVersion is the SeaweedFS module version the harness builds.
const WeedModuleVersion = "v0.0.0-20261109003541-7506e5f91cd6"

// Weed builds SeaweedFS's weed binary once into the cache. `go install
// module@version` refuses a module with replace directives, so the module's
// source is copied out of the module cache and built as a main module.
func (t *Tools) Weed(ctx context.Context) (string, error) {
	return t.once("seaweedfs", func() (string, error) {
		bin := filepath.Join(t.Cache, "bin", "weed-"+WeedModuleVersion)
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
		out, err := Run(ctx, Cmd{Name: "go", Args: []string{"mod", "download", "-json", "github.com/seaweedfs/seaweedfs@" + WeedModuleVersion},
			Dir: t.Root, Timeout: 15 * time.Minute})
		if err != nil {
			return "", fmt.Errorf("downloading SeaweedFS: %w", err)
		}
		var mod struct{ Dir, Error string }
		if err := json.Unmarshal([]byte(out.Stdout), &mod); err != nil || mod.Dir == "" {
			return "", fmt.Errorf("downloading SeaweedFS: %s %v", mod.Error, err)
		}
		src := filepath.Join(t.Cache, "src", "seaweedfs-"+WeedModuleVersion)
		if err := os.RemoveAll(src); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return "", err
		}
		if _, err := Run(ctx, Cmd{Name: "cp", Args: []string{"-r", mod.Dir, src}, Timeout: 5 * time.Minute}); err != nil {
			return "", err
		}
		if _, err := Run(ctx, Cmd{Name: "chmod", Args: []string{"-R", "u+w", src}}); err != nil {
			return "", err
		}
		tmp := bin + ".tmp"
		if _, err := Run(ctx, Cmd{Name: "go", Args: []string{"build", "-o", tmp, "./weed"}, Dir: src, Timeout: 30 * time.Minute}); err != nil {
			return "", fmt.Errorf("building SeaweedFS: %w", err)
		}
		if err := os.RemoveAll(src); err != nil {
			return "", err
		}
		return bin, os.Rename(tmp, bin)
	})
}

// Weed is a running SeaweedFS server with its S3 gateway.
type Weed struct {
	// S3 is the gateway's http:// endpoint.
	S3  string
	cmd *exec.Cmd
	log *os.File
}

// StartWeed starts `weed server -s3` on ip (a loopback address of the
// caller's own: its fixed ports, and the gRPC ports 10000 above them, are
// then free) with its data in dir, and waits until the S3 gateway
// answers. Anonymous access is allowed (no identities configured), so
// any AWS credentials sign requests it accepts.
func StartWeed(ctx context.Context, t *Tools, ip, dir string) (*Weed, error) {
	bin, err := t.Weed(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	const masterPort, volumePort, filerPort, s3Port = 9333, 18080, 8888, 8333
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-ip="+ip, "-ip.bind="+ip, "-dir="+dir,
		"-master.port="+strconv.Itoa(masterPort), "-volume.port="+strconv.Itoa(volumePort),
		"-filer.port="+strconv.Itoa(filerPort), "-s3", "-s3.port="+strconv.Itoa(s3Port),
		"-volume.max=0", "-master.volumeSizeLimitMB=64")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	w := &Weed{S3: "http://" + net.JoinHostPort(ip, strconv.Itoa(s3Port)), cmd: cmd, log: log}
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(w.S3 + "/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return w, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			w.Stop()
			b, _ := os.ReadFile(log.Name())
			return nil, errors.Join(fmt.Errorf("SeaweedFS's S3 gateway at %s did not answer in 90 s:\n%s", w.S3, b), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop kills the server and waits for it.
func (w *Weed) Stop() {
	if w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		_ = w.cmd.Wait()
	}
	w.log.Close()
}
