package version

import (
	"os"
	"regexp"
	"testing"
)

// The wheel and the Maven modules carry the tool's release.
func TestReleaseIsTheBindings(t *testing.T) {
	for path, re := range map[string]string{
		"../../bindings/python/cloudprofiler/__init__.py": `(?m)^__version__ = "([^"]+)"`,
		"../../bindings/python/pyproject.toml":            `(?m)^version = "([^"]+)"`,
		"../../bindings/java/pom.xml":                     `(?s)<artifactId>cloudprofiler-java</artifactId>\s*<version>([^<]+)</version>`,
	} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(re).FindSubmatch(b)
		if m == nil || string(m[1]) != Release {
			t.Errorf("%s: version %q, the tool's %q", path, m, Release)
		}
	}
}
