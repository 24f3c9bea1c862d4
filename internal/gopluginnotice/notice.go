// Package gopluginnotice knows the notice a hashicorp/go-plugin plugin
// prints when no host started it, for command.Hook and the go-plugin
// hook, which both take it for a launch no retry can cure.
package gopluginnotice

import (
	"strings"
)

// notice is what a go-plugin plugin prints on stderr, before exiting with
// code 1, when it is not started by a host that sets its magic cookie
// (go-plugin's server.go).
const notice = "This binary is a plugin. These are not meant to be executed directly."

// In reports whether a plugin's stderr tail holds the notice.
func In(stderr string) bool { return strings.Contains(stderr, notice) }
