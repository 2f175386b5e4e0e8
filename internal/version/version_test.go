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
		"../../Makefile":                                  `(?m)^MAVEN_VERSION := ([0-9.]+)-`,
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
	// The Maven modules: the release is their ${revision} (a checkout's
	// build installs 0.1.0-<checkout>-SNAPSHOT, the Makefile's
	// MAVEN_VERSION) and their jars' name in target/.
	for _, m := range []string{"java", "flink", "storm", "flink-agent"} {
		path := "../../bindings/" + m + "/pom.xml"
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []string{`<revision>([^<]+)</revision>`, `<finalName>\$\{project.artifactId\}-([^<]+)</finalName>`} {
			if v := regexp.MustCompile(re).FindSubmatch(b); v == nil || string(v[1]) != Release {
				t.Errorf("%s: %s gives %q, the tool's %q", path, re, v, Release)
			}
		}
	}
}
