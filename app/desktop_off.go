//go:build !desktop

package app

import (
	"github.com/spf13/cobra"
)

// desktopBuilt: this binary has no desktop window (the headless build).
const desktopBuilt = false

// runDesktop is not reached in the headless build (see desktopBuilt).
func runDesktop(*cobra.Command, *globals, *serveFlags) error {
	return usagef("this sluice was built without the desktop window (make desktop builds sluice-desktop)")
}
