// Package build holds what packaging the desktop app needs at run time:
// the window icon. The rest of this directory is packaging (the Linux
// .desktop entry, the smoke test) and build output (bin/, not in git).
package build

import _ "embed"

// Icon is the application icon, 256×256 PNG (the window's icon and the
// .desktop entry's).
//
//go:embed appicon.png
var Icon []byte
