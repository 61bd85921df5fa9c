package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Class data sharing for the tools' JVMs. Starting a Kafka CLI costs
// about two seconds of CPU, most of it loading and verifying classes, and
// make test starts hundreds of them on two cores. A CDS archive of the
// classes the common tools load (HotSpot maps it instead of parsing the
// jars again) takes about a third off each start. The archive changes
// nothing the tool does: HotSpot checks it against the JDK and the
// classpath and, when they differ, loads every class from the jars as if
// it were not there, without a word.

// cdsSets are the Maven sets whose tools start often enough to be worth an
// archive (the CLIs and the clients' programs); Streams and Connect start
// a few long-lived workers.
var cdsSets = []string{SetKafka, SetOldClients, SetNewClients}

// cdsTrainingVersion is part of the archive's stamp: changing the
// training below rebuilds the archives.
const cdsTrainingVersion = "1"

// cdsTraining are the runs whose loaded classes make the archive: the
// common tools, each against a closed port with short timeouts, so that
// each builds its clients, fails to connect and exits in about a second.
// A tool a set does not hold fails at once and adds only the JDK's classes.
var cdsTraining = [][]string{
	{"org.apache.kafka.tools.TopicCommand", "--bootstrap-server", cdsClosedAddr, "--list", "--command-config", "@config"},
	{"kafka.admin.ConfigCommand", "--bootstrap-server", cdsClosedAddr, "--describe", "--entity-type", "brokers", "--command-config", "@config"},
	{"org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", cdsClosedAddr, "--topic", "cds-training"},
	{"org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", cdsClosedAddr, "--topic", "cds-training",
		"--timeout-ms", "1000", "--consumer.config", "@config"},
}

// cdsClosedAddr is a loopback port nothing listens on (tcpmux): a
// connection to it is refused at once.
const cdsClosedAddr = "127.0.0.1:1"

const cdsTrainingConfig = "default.api.timeout.ms=1000\nrequest.timeout.ms=500\nmax.block.ms=1000\n"

// cdsFlags returns the JVM flags that map set's class data sharing
// archive, building the archive on first use, or none when set has no
// archive or it cannot be built (the tools then start as they would
// without it; the reason is kept in .cache/java/cds/<set>.failed).
func (t *Tools) cdsFlags(ctx context.Context, set, libs string, base []string) []string {
	if !slices.Contains(cdsSets, set) {
		return nil
	}
	archive, err := t.once("cds "+set, func() (string, error) {
		dir := filepath.Join(t.Cache, "java", "cds")
		failed := filepath.Join(dir, set+".failed")
		// Not the first caller's context: its scenario ending must not
		// leave the rest of the run without the archive (the training and
		// the dump have their own timeouts).
		archive, err := t.buildCDS(context.WithoutCancel(ctx), dir, set, libs, base)
		if err != nil {
			_ = os.WriteFile(failed, []byte(err.Error()+"\n"), 0o644)
			return "", err
		}
		_ = os.Remove(failed)
		return archive, nil
	})
	if err != nil {
		return nil
	}
	// Silence HotSpot's CDS warnings: an archive that does not match is
	// simply not used, and the tools' output is what the scenarios read.
	return []string{"-XX:SharedArchiveFile=" + archive, "-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:class+path=off"}
}

// buildCDS returns set's archive in dir, building it when its stamp (the
// JDK, the set's jars and the training) does not match. Two processes may
// want it at once: a lock file lets one build it.
func (t *Tools) buildCDS(ctx context.Context, dir, set, libs string, base []string) (string, error) {
	archive := filepath.Join(dir, set+".jsa")
	stampPath := filepath.Join(dir, set+".stamp")
	stamp, err := cdsStamp(ctx, libs)
	if err != nil {
		return "", err
	}
	current := func() bool {
		b, err := os.ReadFile(stampPath)
		if err != nil || string(b) != stamp {
			return false
		}
		_, err = os.Stat(archive)
		return err == nil
	}
	if current() {
		return archive, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// make test's processes (the compat runner, go test's packages) all
	// want it at their first tool: one builds, the others wait for it.
	lock, err := os.OpenFile(filepath.Join(dir, set+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	if current() {
		return archive, nil
	}
	work, err := os.MkdirTemp(dir, set+".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	config := filepath.Join(work, "training.properties")
	if err := os.WriteFile(config, []byte(cdsTrainingConfig), 0o644); err != nil {
		return "", err
	}
	var lists []string
	for i, run := range cdsTraining {
		list := filepath.Join(work, fmt.Sprintf("%d.classlist", i))
		args := append(slices.Clone(base), "-XX:DumpLoadedClassList="+list)
		for _, a := range run {
			args = append(args, strings.ReplaceAll(a, "@config", config))
		}
		// The training runs are expected to fail (nothing listens).
		_, _ = Run(ctx, Cmd{Name: "java", Args: args, Dir: work, Timeout: time.Minute})
		lists = append(lists, list)
	}
	merged := filepath.Join(work, "merged.classlist")
	if err := mergeClassLists(merged, lists); err != nil {
		return "", err
	}
	tmp := filepath.Join(work, "archive.jsa")
	dump := append(slices.Clone(base), "-Xshare:dump", "-XX:SharedClassListFile="+merged, "-XX:SharedArchiveFile="+tmp)
	if out, err := Run(ctx, Cmd{Name: "java", Args: dump, Dir: work, Timeout: 5 * time.Minute}); err != nil {
		return "", fmt.Errorf("dumping the CDS archive of %s: %w\n%s%s", set, err, out.Stdout, out.Stderr)
	}
	if err := os.Rename(tmp, archive); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(work, "stamp"), []byte(stamp), 0o644); err != nil {
		return "", err
	}
	return archive, os.Rename(filepath.Join(work, "stamp"), stampPath)
}

// cdsStamp names what an archive depends on: the JDK (java -version) and
// every jar of the set with its size and modification time.
func cdsStamp(ctx context.Context, libs string) (string, error) {
	out, err := Run(ctx, Cmd{Name: "java", Args: []string{"-version"}, Timeout: time.Minute})
	if err != nil {
		return "", fmt.Errorf("java -version: %w", err)
	}
	entries, err := os.ReadDir(libs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "training %s\n%s", cdsTrainingVersion, out.Stderr)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s %d %d\n", e.Name(), info.Size(), info.ModTime().UnixNano())
	}
	return b.String(), nil
}

// mergeClassLists writes the lines of lists to path, each once, in the
// order first seen (a class list names a class after what it needs).
// Lists a failed run did not write are skipped.
func mergeClassLists(path string, lists []string) error {
	seen := map[string]bool{}
	var b strings.Builder
	classes := 0
	for _, l := range lists {
		f, err := os.Open(l)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if line == "" || strings.HasPrefix(line, "#") || seen[line] {
				continue
			}
			seen[line] = true
			b.WriteString(line)
			b.WriteByte('\n')
			classes++
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("reading %s: %w", l, err)
		}
	}
	if classes == 0 {
		return fmt.Errorf("the training runs listed no classes")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
