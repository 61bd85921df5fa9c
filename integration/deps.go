package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Pinned versions of everything the harness fetches. Changing one here is
// the whole upgrade: caches are keyed by these strings.
const (
	KafkaVersion        = "4.3.1"
	OldClientsVersion   = "3.9.2"
	NewestClientVersion = "4.4.0"
	FranzGoVersion      = "v1.22.3"
	KafkaJSVersion      = "2.2.4"
	JMXExporterVersion  = "1.0.1"
	mavenDepPlugin      = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
)

// Maven sets: one pom under integration/maven/<set>/ each, gathered into
// .cache/maven/<set>/libs.
const (
	SetKafka      = "kafka-" + KafkaVersion
	SetOldClients = "clients-" + OldClientsVersion
	SetNewClients = "clients-" + NewestClientVersion
	// SetStreams is Kafka Streams with its published examples (WordCountDemo).
	SetStreams = "streams-" + KafkaVersion
	// SetJMXExporter is Prometheus' JMX exporter java agent.
	SetJMXExporter = "jmx-exporter-" + JMXExporterVersion
	// SetTieredStorage is kafka-storage's test jar alone, which holds
	// LocalTieredStorage, the directory-backed RemoteStorageManager the
	// tiered storage scenarios run the reference broker with.
	SetTieredStorage = "tiered-storage-" + KafkaVersion
	// SetConnect is Kafka Connect's runtime (the distributed and
	// standalone workers) with the FileStream connectors and MirrorMaker 2.
	SetConnect = "connect-" + KafkaVersion
)

// toolsLog4j is Kafka's tools log config (WARN to stderr) in the properties
// format, which needs no YAML parser on the classpath.
const toolsLog4j = `status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
`

// brokerLog4j is the reference broker's log config: INFO to stdout, which
// Start sends to the broker's log file.
const brokerLog4j = `status = error
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.target = SYSTEM_OUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
`

// Tools fetches and caches every external program the scenarios need, on
// first use, under <repo>/.cache. Each ensure step runs once per process
// (memoised, including its error) and is cheap when the cache is warm.
//
// Tools is safe for concurrent use: mu guards memo; the ensure functions
// themselves run under mu, so two scenarios never install the same thing at
// once.
type Tools struct {
	Root  string // repository root
	Cache string // <Root>/.cache

	mu   sync.Mutex
	memo map[string]memoEntry
}

type memoEntry struct {
	val string
	err error
}

// NewTools returns Tools for the repository at root.
func NewTools(root string) *Tools {
	return &Tools{Root: root, Cache: filepath.Join(root, ".cache"), memo: map[string]memoEntry{}}
}

// FindRepoRoot walks up from the working directory to the directory that
// holds the Gregor go.mod.
func FindRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/gregorbroker/gregor\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gregor repository (no go.mod for github.com/gregorbroker/gregor above the working directory)")
		}
		dir = parent
	}
}

func (t *Tools) once(key string, f func() (string, error)) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.memo[key]; ok {
		return e.val, e.err
	}
	v, err := f()
	if err != nil {
		err = fmt.Errorf("preparing %s: %w", key, err)
	}
	t.memo[key] = memoEntry{v, err}
	return v, err
}

// MavenLibs returns the libs directory of a Maven set, fetching it with
// maven-dependency-plugin on first use.
func (t *Tools) MavenLibs(ctx context.Context, set string) (string, error) {
	return t.once("maven "+set, func() (string, error) {
		dir := filepath.Join(t.Cache, "maven", set)
		libs := filepath.Join(dir, "libs")
		stamp := filepath.Join(dir, ".complete")
		pom := filepath.Join(t.Root, "integration", "maven", set, "pom.xml")
		pomBytes, err := os.ReadFile(pom)
		if err != nil {
			return "", err
		}
		if b, err := os.ReadFile(stamp); err == nil && string(b) == string(pomBytes) {
			return libs, nil
		}
		if _, err := exec.LookPath("mvn"); err != nil {
			return "", errors.New("mvn not found: install Maven 3.6.3+ (apt-get install maven)")
		}
		tmp := libs + ".tmp"
		_ = os.RemoveAll(tmp)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		_, err = Run(ctx, Cmd{
			Name: "mvn",
			Args: []string{"-B", "-q", "-Dmaven.repo.local=" + filepath.Join(t.Cache, "m2"),
				mavenDepPlugin + ":copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory=" + tmp},
			Dir:     filepath.Dir(pom),
			Timeout: 15 * time.Minute,
		})
		if err != nil {
			return "", err
		}
		_ = os.RemoveAll(libs)
		if err := os.Rename(tmp, libs); err != nil {
			return "", err
		}
		return libs, os.WriteFile(stamp, pomBytes, 0o644)
	})
}

// LocalTieredStorageJar returns the path of kafka-storage's test jar
// (SetTieredStorage), which holds Kafka's LocalTieredStorage, fetching it
// on first use.
func (t *Tools) LocalTieredStorageJar(ctx context.Context) (string, error) {
	libs, err := t.MavenLibs(ctx, SetTieredStorage)
	if err != nil {
		return "", err
	}
	jar := filepath.Join(libs, "kafka-storage-"+KafkaVersion+"-test.jar")
	if _, err := os.Stat(jar); err != nil {
		return "", fmt.Errorf("the %s set holds no test jar: %w", SetTieredStorage, err)
	}
	return jar, nil
}

// Log4jConfig writes the tools' (or the broker's) log4j2 config into the
// cache and returns its path.
func (t *Tools) Log4jConfig(broker bool) (string, error) {
	name, body := "tools-log4j2.properties", toolsLog4j
	if broker {
		name, body = "broker-log4j2.properties", brokerLog4j
	}
	p := filepath.Join(t.Cache, "maven", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	if b, err := os.ReadFile(p); err == nil && string(b) == body {
		return p, nil
	}
	return p, os.WriteFile(p, []byte(body), 0o644)
}

// JavaCmd builds a command that runs mainClass from a Maven set with the
// flags kafka-run-class.sh uses for tools, plus flags that cut JVM start-up
// time for short-lived CLIs.
func (t *Tools) JavaCmd(ctx context.Context, set, mainClass string, args ...string) (Cmd, error) {
	return t.JavaCmdWithClasspath(ctx, set, "", mainClass, args...)
}

// JavaCmdWithClasspath is JavaCmd with one more classpath entry (a
// JavaClients directory) after the set's jars, or none when extra is "".
func (t *Tools) JavaCmdWithClasspath(ctx context.Context, set, extra, mainClass string, args ...string) (Cmd, error) {
	logCfg, err := t.Log4jConfig(false)
	if err != nil {
		return Cmd{}, err
	}
	return t.javaCmdLogging(ctx, set, extra, logCfg, mainClass, args...)
}

// javaCmdLogging is JavaCmdWithClasspath with the log4j2 config file logCfg.
func (t *Tools) javaCmdLogging(ctx context.Context, set, extra, logCfg, mainClass string, args ...string) (Cmd, error) {
	libs, err := t.MavenLibs(ctx, set)
	if err != nil {
		return Cmd{}, err
	}
	cp := libs + "/*"
	if extra != "" {
		cp += string(filepath.ListSeparator) + extra
	}
	flags := []string{"-Xmx256M", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + logCfg}
	// The archive is built with the set's jars alone on the classpath; a
	// classpath that goes on after them (extra) can still use it.
	cds := t.cdsFlags(ctx, set, libs, append(slices.Clone(flags), "-cp", libs+"/*"))
	jargs := slices.Concat(flags, cds, []string{"-cp", cp, mainClass}, args)
	return Cmd{Name: "java", Args: jargs}, nil
}

// JavaClients compiles the programs in integration/clients/java against a
// Maven set's jars (so that one source checks several client releases) and
// returns the classes directory. The sources are the cache stamp.
func (t *Tools) JavaClients(ctx context.Context, set string) (string, error) {
	return t.JavaPrograms(ctx, set, "java")
}

// JavaPrograms compiles the programs in integration/clients/<dir> against a
// Maven set's jars and returns the classes directory. Each directory holds
// sources that need one kind of set: "java" the clients' API alone (built
// against several releases), "java-streams" Kafka Streams (SetStreams).
func (t *Tools) JavaPrograms(ctx context.Context, set, dir string) (string, error) {
	libs, err := t.MavenLibs(ctx, set)
	if err != nil {
		return "", err
	}
	// The "java" directory keeps the cache path it always had, so that a
	// warm cache stays warm.
	cacheName := set
	if dir != "java" {
		cacheName = set + "-" + dir
	}
	return t.once("java clients "+cacheName, func() (string, error) {
		srcDir := filepath.Join(t.Root, "integration", "clients", dir)
		srcs, err := filepath.Glob(filepath.Join(srcDir, "*.java"))
		if err != nil || len(srcs) == 0 {
			return "", fmt.Errorf("no Java sources in %s (%v)", srcDir, err)
		}
		sort.Strings(srcs)
		var stampBody strings.Builder
		for _, s := range srcs {
			b, err := os.ReadFile(s)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&stampBody, "%s\n%s\n", filepath.Base(s), b)
		}
		out := filepath.Join(t.Cache, "java", cacheName)
		classes := filepath.Join(out, "classes")
		stamp := filepath.Join(out, ".sources")
		if b, err := os.ReadFile(stamp); err == nil && string(b) == stampBody.String() {
			return classes, nil
		}
		if _, err := exec.LookPath("javac"); err != nil {
			return "", errors.New("javac not found: install a JDK 11+ (apt-get install default-jdk-headless)")
		}
		tmp := classes + ".tmp"
		_ = os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return "", err
		}
		args := append([]string{"-nowarn", "-encoding", "UTF-8", "-cp", libs + "/*", "-d", tmp}, srcs...)
		if _, err := Run(ctx, Cmd{Name: "javac", Args: args, Timeout: 5 * time.Minute}); err != nil {
			return "", err
		}
		_ = os.RemoveAll(classes)
		if err := os.Rename(tmp, classes); err != nil {
			return "", err
		}
		return classes, os.WriteFile(stamp, []byte(stampBody.String()), 0o644)
	})
}

// Kcat returns the path of kcat, installing Debian's package if needed.
func (t *Tools) Kcat(ctx context.Context) (string, error) {
	return t.AptBinary(ctx, "kcat", "kcat")
}

// AptBinary returns the path of program bin, installing Debian's package
// pkg first if bin is not on the PATH (as root, with apt-get).
func (t *Tools) AptBinary(ctx context.Context, pkg, bin string) (string, error) {
	return t.once(bin, func() (string, error) {
		if p, err := exec.LookPath(bin); err == nil {
			return p, nil
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			return "", fmt.Errorf("%s is not installed and apt-get is not available", bin)
		}
		install := Cmd{Name: "apt-get", Args: []string{"install", "-y", "-q", pkg},
			Env: []string{"DEBIAN_FRONTEND=noninteractive"}, Timeout: 5 * time.Minute}
		if _, err := Run(ctx, install); err != nil {
			// A fresh machine has no package lists yet.
			if _, uerr := Run(ctx, Cmd{Name: "apt-get", Args: []string{"update", "-q"}, Timeout: 5 * time.Minute}); uerr != nil {
				return "", fmt.Errorf("apt-get update: %w", uerr)
			}
			if _, err := Run(ctx, install); err != nil {
				return "", err
			}
		}
		return exec.LookPath(bin)
	})
}

// Python returns the interpreter of a venv that holds the pinned Python
// clients (integration/clients/python/requirements.txt).
func (t *Tools) Python(ctx context.Context) (string, error) {
	return t.once("python venv", func() (string, error) {
		venv := filepath.Join(t.Cache, "venv")
		py := filepath.Join(venv, "bin", "python")
		reqPath := filepath.Join(t.Root, "integration", "clients", "python", "requirements.txt")
		req, err := os.ReadFile(reqPath)
		if err != nil {
			return "", err
		}
		stamp := filepath.Join(venv, ".requirements")
		if b, err := os.ReadFile(stamp); err == nil && string(b) == string(req) {
			return py, nil
		}
		if _, err := os.Stat(py); err != nil {
			if _, err := Run(ctx, Cmd{Name: "python3", Args: []string{"-m", "venv", venv}, Timeout: 2 * time.Minute}); err != nil {
				return "", err
			}
		}
		if _, err := Run(ctx, Cmd{Name: py, Args: []string{"-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", reqPath},
			Timeout: 10 * time.Minute}); err != nil {
			return "", err
		}
		return py, os.WriteFile(stamp, req, 0o644)
	})
}

// NodeModules returns a node_modules directory holding the pinned kafkajs.
func (t *Tools) NodeModules(ctx context.Context) (string, error) {
	return t.once("npm kafkajs", func() (string, error) {
		prefix := filepath.Join(t.Cache, "node")
		mods := filepath.Join(prefix, "node_modules")
		want := "kafkajs@" + KafkaJSVersion
		stamp := filepath.Join(prefix, ".installed")
		if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
			return mods, nil
		}
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return "", err
		}
		if _, err := Run(ctx, Cmd{Name: "npm", Args: []string{"install", "--prefix", prefix, "--no-audit", "--no-fund", "--no-save", want},
			Timeout: 10 * time.Minute}); err != nil {
			return "", err
		}
		return mods, os.WriteFile(stamp, []byte(want), 0o644)
	})
}

// GoClients builds the Go client programs (sarama, segmentio/kafka-go) from
// their own module under integration/clients/go and returns the binary.
func (t *Tools) GoClients(ctx context.Context) (string, error) {
	return t.once("go clients", func() (string, error) {
		bin := filepath.Join(t.Cache, "bin", "goclients")
		_, err := Run(ctx, Cmd{Name: "go", Args: []string{"build", "-o", bin, "."},
			Dir: filepath.Join(t.Root, "integration", "clients", "go"), Timeout: 10 * time.Minute})
		return bin, err
	})
}

// KgoModule prepares a throwaway module that requires franz-go at the pinned
// version, so that `go test github.com/twmb/franz-go/pkg/kgo` runs the
// suite exactly as published, from the module cache.
func (t *Tools) KgoModule(ctx context.Context) (string, error) {
	return t.once("kgo module", func() (string, error) {
		dir := filepath.Join(t.Cache, "kgo-"+FranzGoVersion)
		stamp := filepath.Join(dir, ".complete")
		if _, err := os.Stat(stamp); err == nil {
			return dir, nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		gomod := "module gregor.invalid/kgosuite\n\ngo 1.26\n"
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
			return "", err
		}
		// A blank import keeps `go mod tidy`-style tools from dropping the
		// requirement; the module itself is never built.
		src := "package kgosuite\n\nimport _ \"github.com/twmb/franz-go/pkg/kgo\"\n"
		if err := os.WriteFile(filepath.Join(dir, "suite.go"), []byte(src), 0o644); err != nil {
			return "", err
		}
		if _, err := Run(ctx, Cmd{Name: "go", Args: []string{"get", "-t", "github.com/twmb/franz-go/pkg/kgo@" + FranzGoVersion},
			Dir: dir, Timeout: 10 * time.Minute}); err != nil {
			return "", err
		}
		return dir, os.WriteFile(stamp, []byte(FranzGoVersion), 0o644)
	})
}

// Versions reports the version of every tool the harness has prepared so
// far in this process, for the report. Tools that were not needed are left
// out rather than installed just to be named.
func (t *Tools) Versions(ctx context.Context) map[string]string {
	t.mu.Lock()
	keys := make([]string, 0, len(t.memo))
	for k, e := range t.memo {
		if e.err == nil {
			keys = append(keys, k)
		}
	}
	t.mu.Unlock()
	sort.Strings(keys)
	v := map[string]string{}
	first := func(c Cmd, re string) string {
		c.Timeout = 30 * time.Second
		out, err := Run(ctx, c)
		if err != nil {
			return "unknown"
		}
		m := regexp.MustCompile(re).FindStringSubmatch(out.Stdout + out.Stderr)
		if m == nil {
			return "unknown"
		}
		return m[1]
	}
	v["go"] = first(Cmd{Name: "go", Args: []string{"version"}}, `go version (go\S+)`)
	v["java"] = first(Cmd{Name: "java", Args: []string{"-version"}}, `version "([^"]+)"`)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "maven "):
			set := strings.TrimPrefix(k, "maven ")
			v["kafka jars ("+set+")"] = mavenJarVersions(filepath.Join(t.Cache, "maven", set, "libs"))
		case strings.HasPrefix(k, "java clients "):
			v["javac"] = first(Cmd{Name: "javac", Args: []string{"-version"}}, `javac (\S+)`)
		case k == "kcat":
			v["kcat"] = first(Cmd{Name: "kcat", Args: []string{"-V"}}, `Version (\S+ \([^)]*librdkafka [0-9.]+)`) + ")"
		case k == "python venv":
			py := filepath.Join(t.Cache, "venv", "bin", "python")
			v["python"] = first(Cmd{Name: py, Args: []string{"--version"}}, `Python (\S+)`)
			v["confluent-kafka"] = first(Cmd{Name: py, Args: []string{"-c", "import confluent_kafka as c; print(c.__version__, '(librdkafka', c.libversion()[0] + ')')"}}, `(.+)`)
			v["kafka-python"] = first(Cmd{Name: py, Args: []string{"-c", "import kafka; print(kafka.__version__)"}}, `(\S+)`)
		case k == "npm kafkajs":
			v["node"] = first(Cmd{Name: "node", Args: []string{"--version"}}, `v(\S+)`)
			v["kafkajs"] = KafkaJSVersion
		case k == "go clients":
			v["sarama, kafka-go"] = goModRequires(filepath.Join(t.Root, "integration", "clients", "go", "go.mod"),
				"github.com/IBM/sarama", "github.com/segmentio/kafka-go")
		case k == "kgo module":
			v["franz-go kgo suite"] = FranzGoVersion
		}
	}
	return v
}

// mavenJarVersions names the kafka-clients and kafka-tools jars in libs
// (and test jars: LocalTieredStorage's).
func mavenJarVersions(libs string) string {
	ents, err := os.ReadDir(libs)
	if err != nil {
		return "unknown"
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "kafka-clients-") || strings.HasPrefix(n, "kafka-streams-4") || strings.HasPrefix(n, "kafka-tools-4") || strings.HasPrefix(n, "kafka-tools-3") || strings.HasPrefix(n, "kafka_2.13-") ||
			strings.HasSuffix(n, "-test.jar") {
			names = append(names, strings.TrimSuffix(n, ".jar"))
		}
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func goModRequires(path string, mods ...string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			for _, m := range mods {
				if fld == m && i+1 < len(fields) {
					out = append(out, m+" "+fields[i+1])
				}
			}
		}
	}
	return strings.Join(out, ", ")
}
