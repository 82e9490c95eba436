package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Naming errors concern a deployment, not an image, so they do not wrap ErrInvalid.
var (
	ErrProgramName = errors.New("bad program name")
	ErrServedName  = errors.New("served tool name over 64 characters")
)

// MaxProgramName and MaxToolName bound names as ABI.md does; a served name
// ({program}_{tool}) is at most MaxServedName characters.
const (
	MaxProgramName = 63
	MaxToolName    = 64
	MaxServedName  = 64
)

// CheckProgramName reports whether name is a valid program name: 1 to 63
// characters of [a-z0-9-], starting with a letter or digit.
func CheckProgramName(name string) error {
	if name == "" {
		return fmt.Errorf("program name is empty: %w", ErrProgramName)
	}
	if len(name) > MaxProgramName {
		return fmt.Errorf("program name %q is %d characters, over %d: %w", name, len(name), MaxProgramName, ErrProgramName)
	}
	if name[0] == '-' {
		return fmt.Errorf("program name %q starts with '-': %w", name, ErrProgramName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("program name %q has %q: want [a-z0-9-]: %w", name, c, ErrProgramName)
		}
	}
	return nil
}

// ValidToolName reports whether name is 1 to 64 characters of [A-Za-z0-9_-].
func ValidToolName(name string) bool {
	if name == "" || len(name) > MaxToolName {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validSyscallName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// FullName is how manifests and people refer to a tool: "program.tool".
func FullName(program, tool string) string { return program + "." + tool }

// ServedName is how MCP serves a tool: "program_tool". The first '_' splits
// it back, since program names have none.
func ServedName(program, tool string) string { return program + "_" + tool }

// SplitFullName splits "program.tool" and checks both names.
func SplitFullName(full string) (program, tool string, err error) {
	program, tool, ok := strings.Cut(full, ".")
	if !ok {
		return "", "", fmt.Errorf("%q is not program.tool", full)
	}
	if err := CheckProgramName(program); err != nil {
		return "", "", err
	}
	if !ValidToolName(tool) {
		return "", "", fmt.Errorf("tool name %q: want 1 to 64 characters of [A-Za-z0-9_-]", tool)
	}
	return program, tool, nil
}

// SplitServedName splits "program_tool" at its first '_'.
func SplitServedName(served string) (program, tool string, ok bool) {
	return strings.Cut(served, "_")
}

// CheckServedNames refuses a deployment under program whose served tool names
// would exceed MaxServedName characters, naming the first such name.
func (m *Manifest) CheckServedNames(program string) error {
	for _, t := range m.Tools {
		if s := ServedName(program, t.Name); len(s) > MaxServedName {
			return fmt.Errorf("%s is %d characters, over %d: %w", s, len(s), MaxServedName, ErrServedName)
		}
	}
	return nil
}

// Digest is an image's identity: sha256:<64 lowercase hex> of its bytes.
func Digest(image []byte) string {
	sum := sha256.Sum256(image)
	return "sha256:" + hex.EncodeToString(sum[:])
}
