// Package version says which cloudprofiler this is: the release every
// artifact carries (the tool, the wheel, the Maven modules) and the commit
// the binary was built from.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Release is the project's version; the wheel (bindings/python) and the
// Maven modules (bindings/java/pom.xml) carry the same.
const Release = "0.1.0"

// String is one line: the release, the commit the binary was built from
// (Go stamps it when it builds inside a git checkout; "unknown" from a
// tarball, and in a test binary), "+changes" when the tree differed from
// it, and the Go that built it.
func String() string {
	commit, modified := "unknown", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += "+changes"
	}
	return fmt.Sprintf("cloudprofiler %s (commit %s, %s)", Release, commit, runtime.Version())
}
