package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/conclave-agent/conclave/internal/atomicfile"
	"github.com/conclave-agent/conclave/internal/safefile"
)

// MaintFile is the name of the maintenance record in the data directory.
const MaintFile = "maint"

// MaxReason bounds a maintenance reason, in bytes.
const MaxReason = 256

// maxMaintFile bounds what ReadMaint reads: the JSON of a reason of
// MaxReason bytes, escaped, with room to spare.
const maxMaintFile = 4096

// Maint is the maintenance record: while the file exists the agent is in
// maintenance, across restarts.
type Maint struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// CheckReason refuses a reason that is too long, not UTF-8 or holds
// control characters (it is printed in status and logs).
func CheckReason(s string) error {
	if len(s) > MaxReason {
		return fmt.Errorf("health: maintenance reason of %d bytes, at most %d", len(s), MaxReason)
	}
	if !utf8.ValidString(s) {
		return errors.New("health: maintenance reason is not UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return errors.New("health: maintenance reason holds a control character")
		}
	}
	return nil
}

// ReadMaint reads the maintenance record of dataDir; on is false when
// there is none. A record that is too large or unreadable is an error, not
// "no maintenance": the operator asked for maintenance and must not lose it
// silently.
func ReadMaint(dataDir string) (m Maint, on bool, err error) {
	b, err := safefile.ReadFile(filepath.Join(dataDir, MaintFile), maxMaintFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Maint{}, false, nil
	}
	if err != nil {
		return Maint{}, false, fmt.Errorf("health: read maintenance record: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Maint{}, false, fmt.Errorf("health: maintenance record %s: %w", filepath.Join(dataDir, MaintFile), err)
	}
	if err := CheckReason(m.Reason); err != nil {
		return Maint{}, false, fmt.Errorf("%w (in %s)", err, filepath.Join(dataDir, MaintFile))
	}
	return m, true, nil
}

// WriteMaint durably records maintenance in dataDir.
func WriteMaint(dataDir string, m Maint) error {
	if err := CheckReason(m.Reason); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dataDir, MaintFile), append(b, '\n'), ".maint-*"); err != nil {
		return fmt.Errorf("health: write maintenance record: %w", err)
	}
	return nil
}

// ClearMaint durably ends maintenance in dataDir (no error when none).
func ClearMaint(dataDir string) error {
	err := os.Remove(filepath.Join(dataDir, MaintFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("health: clear maintenance record: %w", err)
	}
	if err := atomicfile.SyncDir(dataDir); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	return nil
}
