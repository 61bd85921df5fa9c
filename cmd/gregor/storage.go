package main

// gregor storage: the kafka-storage.sh sub-commands Gregor needs
// (random-uuid, format, info), with the same flags.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
)

func storageCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "random-uuid":
		fmt.Fprintln(stdout, protocol.RandomUUID().String())
		return 0
	case "format":
		return storageFormat(args[1:], stdout, stderr)
	case "info":
		return storageInfo(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "gregor storage: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// multiFlag collects repeated flag values.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func storageFormat(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("gregor storage format", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var configFile, clusterID, initialControllers, releaseVersion string
	var standalone, noInitialControllers, ignoreFormatted bool
	var features, overrides, scrams multiFlag
	for _, n := range []string{"config", "c"} {
		fset.StringVar(&configFile, n, "", "the server properties file")
	}
	for _, n := range []string{"cluster-id", "t"} {
		fset.StringVar(&clusterID, n, "", "the cluster id (gregor storage random-uuid)")
	}
	for _, n := range []string{"standalone", "s"} {
		fset.BoolVar(&standalone, n, false, "format as the only voter of a new dynamic quorum")
	}
	for _, n := range []string{"initial-controllers", "I"} {
		fset.StringVar(&initialControllers, n, "", "id@host:port:directory-id,... of the initial voters")
	}
	for _, n := range []string{"no-initial-controllers", "N"} {
		fset.BoolVar(&noInitialControllers, n, false, "format without initial voters (a node that joins later)")
	}
	for _, n := range []string{"ignore-formatted", "g"} {
		fset.BoolVar(&ignoreFormatted, n, false, "succeed when a directory is already formatted")
	}
	for _, n := range []string{"release-version", "r"} {
		fset.StringVar(&releaseVersion, n, "", "the metadata.version to bootstrap, a release (3.9 to 4.3) or a level name (3.9-IV0 to 4.3-IV0); the features default to that release's")
	}
	for _, n := range []string{"feature", "f"} {
		fset.Var(&features, n, "name=level of a feature to bootstrap")
	}
	for _, n := range []string{"add-scram", "S"} {
		fset.Var(&scrams, n, "a SCRAM credential to add, e.g. 'SCRAM-SHA-256=[name=alice,password=alice-secret]'")
	}
	fset.Var(&overrides, "override", "key=value on top of the properties file")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	if configFile == "" {
		fmt.Fprintln(stderr, "gregor storage format: --config is required")
		return 2
	}
	n := 0
	for _, b := range []bool{standalone, initialControllers != "", noInitialControllers} {
		if b {
			n++
		}
	}
	if n > 1 {
		fmt.Fprintln(stderr, "gregor storage format: --standalone, --initial-controllers and --no-initial-controllers are mutually exclusive")
		return 2
	}
	s, err := loadSettings(configFile, overrides, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gregor storage format: %v\n", err)
		return 1
	}
	if clusterID == "" {
		fmt.Fprintln(stderr, "gregor storage format: --cluster-id is required")
		return 2
	}
	if _, err := protocol.ParseUUID(clusterID); err != nil {
		fmt.Fprintf(stderr, "gregor storage format: cluster id %s is not a valid UUID\n", clusterID)
		return 1
	}
	mv := metadata.LatestMetadataVersion
	if releaseVersion != "" {
		var ok bool
		if mv, ok = metadata.ParseMetadataVersion(releaseVersion); !ok || mv < oldestBootstrapMetadataVersion {
			fmt.Fprintf(stderr, "gregor storage format: unsupported release version %s: Gregor bootstraps metadata.version %s to %s\n",
				releaseVersion, metadata.MetadataVersionName(oldestBootstrapMetadataVersion), metadata.MetadataVersionName(metadata.LatestMetadataVersion))
			return 1
		}
		s.bootstrapFeatures = metadata.BootstrapFeatures(mv)
		s.bootstrapFeatures[metadata.MetadataVersionFeature] = mv
	}
	for _, f := range features {
		name, level, ok := strings.Cut(f, "=")
		if name == metadata.MetadataVersionFeature {
			fmt.Fprintln(stderr, "gregor storage format: metadata.version cannot be set with --feature; use --release-version")
			return 1
		}
		lv, err := strconv.ParseInt(level, 10, 16)
		rng, known := s.supportedFeatures[name]
		if !ok || err != nil || !known || int16(lv) < rng[0] || int16(lv) > rng[1] {
			fmt.Fprintf(stderr, "gregor storage format: unsupported feature %s\n", f)
			return 1
		}
		if s.bootstrapFeatures == nil {
			s.bootstrapFeatures = map[string]int16{}
		}
		s.bootstrapFeatures[name] = int16(lv)
	}
	levels := maps.Clone(s.bootstrapFeatures)
	levels[metadata.MetadataVersionFeature] = mv
	if why := metadata.FeatureDependencyViolation(levels); why != "" {
		fmt.Fprintf(stderr, "gregor storage format: %s\n", why)
		return 1
	}
	for _, arg := range scrams {
		rec, err := parseAddScram(arg)
		if err != nil {
			fmt.Fprintf(stderr, "gregor storage format: %v\n", err)
			return 1
		}
		s.bootstrapScram = append(s.bootstrapScram, rec)
	}
	switch {
	case standalone:
		if !s.isController {
			fmt.Fprintln(stderr, "gregor storage format: --standalone needs a node with the controller role")
			return 1
		}
	case initialControllers != "":
		voters, err := parseInitialControllers(initialControllers, s.controllerListenerName)
		if err != nil {
			fmt.Fprintf(stderr, "gregor storage format: %v\n", err)
			return 1
		}
		s.voters = voters
	case noInitialControllers:
		if s.isController && len(s.cfg.ControllerQuorumVoters) == 0 {
			if len(s.cfg.ControllerQuorumBootstrapServers) == 0 {
				fmt.Fprintln(stderr, "gregor storage format: --no-initial-controllers on a controller needs controller.quorum.bootstrap.servers: the quorum it joins")
				return 1
			}
			// A controller that joins a running dynamic quorum: it
			// follows the log as a learner until
			// kafka-metadata-quorum add-controller makes it a voter.
			s.voters = nil
		}
	}

	fsys := vfs.OSFS{}
	formatted := 0
	for _, d := range allDirs(s) {
		if _, err := storage.ReadMetaProperties(fsys, d); err == nil {
			formatted++
		}
	}
	if formatted > 0 && !ignoreFormatted {
		fmt.Fprintln(stderr, "gregor storage format: a log directory is already formatted. Use --ignore-formatted to ignore this directory and format the others.")
		return 1
	}
	if formatted == len(allDirs(s)) {
		fmt.Fprintln(stdout, "All of the log directories are already formatted.")
		return 0
	}
	s.forcedClusterID = clusterID
	if _, _, err := ensureFormatted(fsys, s, s.logger); err != nil {
		fmt.Fprintf(stderr, "gregor storage format: %v\n", err)
		return 1
	}
	for _, d := range allDirs(s) {
		fmt.Fprintf(stdout, "Formatting data directory %s with metadata.version %s.\n", d, metadata.MetadataVersionName(mv))
	}
	return 0
}

// oldestBootstrapMetadataVersion is the oldest metadata.version a node is
// formatted with: 3.9-IV0, the first with KIP-853's dynamic quorum
// (kraft.version 1), which Gregor's quorum always runs. Older levels change
// behaviour Gregor does not switch on metadata.version (controller
// registration from 3.7-IV0, log directory assignment from 3.7-IV2), so it
// refuses them rather than run them wrongly. A cluster formatted at 3.9 is
// upgraded while it runs with kafka-features upgrade --metadata.
const oldestBootstrapMetadataVersion int16 = 21

// parseInitialControllers parses KIP-853's id@host:port:directory-id list.
func parseInitialControllers(list, listener string) ([]metadata.Voter, error) {
	var out []metadata.Voter
	for _, item := range strings.Split(list, ",") {
		idPart, rest, ok := strings.Cut(item, "@")
		id, err := strconv.ParseInt(idPart, 10, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("invalid --initial-controllers entry %q", item)
		}
		last := strings.LastIndex(rest, ":")
		if last < 0 {
			return nil, fmt.Errorf("invalid --initial-controllers entry %q: no directory id", item)
		}
		hostPort, dirID := rest[:last], rest[last+1:]
		colon := strings.LastIndex(hostPort, ":")
		if colon < 0 {
			return nil, fmt.Errorf("invalid --initial-controllers entry %q: no port", item)
		}
		port, err := strconv.ParseInt(hostPort[colon+1:], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("invalid --initial-controllers entry %q: bad port", item)
		}
		dir, err := protocol.ParseUUID(dirID)
		if err != nil {
			return nil, fmt.Errorf("invalid --initial-controllers entry %q: %v", item, err)
		}
		out = append(out, metadata.Voter{ID: int32(id), DirectoryID: dir, Endpoints: []metadata.Endpoint{{
			Name: listener, Host: strings.Trim(hostPort[:colon], "[]"), Port: int32(port),
		}}})
	}
	return out, nil
}

func storageInfo(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("gregor storage info", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var configFile string
	for _, n := range []string{"config", "c"} {
		fset.StringVar(&configFile, n, "", "the server properties file")
	}
	if err := fset.Parse(args); err != nil {
		return 2
	}
	if configFile == "" {
		fmt.Fprintln(stderr, "gregor storage info: --config is required")
		return 2
	}
	s, err := loadSettings(configFile, nil, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "gregor storage info: %v\n", err)
		return 1
	}
	fsys := vfs.OSFS{}
	var found, missing []string
	var metas []storage.MetaProperties
	for _, d := range allDirs(s) {
		mp, err := storage.ReadMetaProperties(fsys, d)
		if err != nil {
			missing = append(missing, d)
			continue
		}
		found = append(found, d)
		metas = append(metas, mp)
	}
	if len(found) > 0 {
		fmt.Fprintln(stdout, "Found log directories:")
		for _, d := range found {
			fmt.Fprintf(stdout, "  %s\n", d)
		}
		fmt.Fprintln(stdout)
		mp := metas[0]
		fmt.Fprintf(stdout, "Found metadata: {cluster.id=%s, directory.id=%s, node.id=%d, version=%d}\n", mp.ClusterID, mp.DirectoryID, mp.NodeID, mp.Version)
	}
	if info, err := controller.ReadFormat(fsys, s.metadataDir); err == nil {
		fmt.Fprintf(stdout, "Bootstrap features: %v\n", info.Features)
	} else if !errors.Is(err, controller.ErrNotFormatted) {
		fmt.Fprintf(stdout, "Reading the metadata dir failed: %v\n", err)
	}
	if len(missing) > 0 {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Found problems:")
		for _, d := range missing {
			fmt.Fprintf(stdout, "  %s is not formatted.\n", d)
		}
		return 1
	}
	return 0
}
