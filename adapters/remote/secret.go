package remote

import (
	"fmt"
	"os"
	"strings"

	"github.com/sluicehq/sluice/engine"
)

// Secret names where a password or key is found: an environment variable
// or a file readable by its owner only. The source's config stores the
// names, never the value; the value is read at every connection (so a
// rotated secret is picked up) and never logged.
type Secret struct {
	// Env is the environment variable's name.
	Env string `json:"env,omitempty"`
	// File is an absolute path to a file of mode 0600 (or stricter) whose
	// first line is the secret.
	File string `json:"file,omitempty"`
}

// IsZero reports whether no secret is named.
func (s Secret) IsZero() bool { return s.Env == "" && s.File == "" }

// Validate checks the names (what is named: a missing variable or a file
// readable by others is an error when it is read).
func (s Secret) Validate(what string) error {
	if s.Env != "" && s.File != "" {
		return engine.Errorf(engine.EINVALID, "%s: name an environment variable or a file, not both", what)
	}
	if s.Env != "" && strings.ContainsAny(s.Env, "= \t\n") {
		return engine.Errorf(engine.EINVALID, "%s: %q is not an environment variable name", what, s.Env)
	}
	if s.File != "" && !strings.HasPrefix(s.File, "/") {
		return engine.Errorf(engine.EINVALID, "%s: file %q is not an absolute path", what, s.File)
	}
	return nil
}

// Read returns the secret. The error names the variable or file, never
// the value.
func (s Secret) Read(what string) (string, error) {
	switch {
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return "", engine.Errorf(engine.EINVALID, "%s: environment variable %s is not set in this process", what, s.Env)
		}
		return v, nil
	case s.File != "":
		fi, err := os.Stat(s.File)
		if err != nil {
			return "", engine.Errorf(engine.EINVALID, "%s: %v", what, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", engine.Errorf(engine.EINVALID, "%s: file %s has mode %04o: it must be readable by its owner only (chmod 600)",
				what, s.File, fi.Mode().Perm())
		}
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", engine.Errorf(engine.EINVALID, "%s: %v", what, err)
		}
		v, _, _ := strings.Cut(string(b), "\n")
		v = strings.TrimRight(v, "\r")
		if v == "" {
			return "", engine.Errorf(engine.EINVALID, "%s: file %s is empty", what, s.File)
		}
		return v, nil
	}
	return "", fmt.Errorf("%s: no secret named", what)
}
