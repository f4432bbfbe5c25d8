//go:build tools

package tools

import _ "gvisor.dev/gvisor/runsc"
