package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// failedMarker is the file a run with failures leaves in its work
// directory.
const failedMarker = "FAILED"

// failedRunsKept is how many failed runs' work directories a target keeps.
const failedRunsKept = 2

// PrepareWorkDir empties dir for a new run. A failure that shows up once in
// many runs (FINDINGS.md's intermittent ones) can only be explained from
// its broker logs and tool output, and the next run used to delete them.
// So when the previous run left the failed marker, its directory (and the
// spare target's, which shared scenarios may have run on) moves to
// dir-failed-<time> instead, and only the newest failedRunsKept of those
// are kept.
func PrepareWorkDir(dir, spareDir string) error {
	if _, err := os.Stat(filepath.Join(dir, failedMarker)); err == nil {
		kept := fmt.Sprintf("%s-failed-%s", dir, time.Now().UTC().Format("20060102T150405.000000000"))
		if err := os.Rename(dir, kept); err != nil {
			return fmt.Errorf("keeping the failed run's %s: %w", dir, err)
		}
		if spareDir != "" {
			if err := os.Rename(spareDir, filepath.Join(kept, "spare")); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("keeping the failed run's %s: %w", spareDir, err)
			}
		}
		if err := pruneFailedRuns(dir); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("emptying %s: %w", dir, err)
	}
	if spareDir != "" {
		if err := os.RemoveAll(spareDir); err != nil {
			return fmt.Errorf("emptying %s: %w", spareDir, err)
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// MarkWorkDirFailed records in dir that its run had failures, for the next
// PrepareWorkDir.
func MarkWorkDirFailed(dir string) error {
	return os.WriteFile(filepath.Join(dir, failedMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
}

// pruneFailedRuns removes all but the newest failedRunsKept of dir's
// kept failed runs (their names sort by time).
func pruneFailedRuns(dir string) error {
	kept, err := filepath.Glob(dir + "-failed-*")
	if err != nil {
		return err
	}
	slices.Sort(kept)
	for len(kept) > failedRunsKept {
		if err := os.RemoveAll(kept[0]); err != nil {
			return fmt.Errorf("removing an old failed run's %s: %w", kept[0], err)
		}
		kept = kept[1:]
	}
	return nil
}
