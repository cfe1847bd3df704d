package engine

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads from JSON or YAML either as a Go
// duration string ("1.5s", "2m") or as a number of milliseconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON accepts "1m30s" or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case float64:
		*d = Duration(time.Duration(x * float64(time.Millisecond)))
	case string:
		p, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("invalid duration %q (use a number of milliseconds or a value such as \"1.5s\")", x)
		}
		*d = Duration(p)
	default:
		return fmt.Errorf("invalid duration %s", b)
	}
	return nil
}
