package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every command and subcommand answers --help (and -h) with its usage on
// stdout, every flag of its flag set listed, and exit status 0; help and
// unknown commands as README says.
func TestHelp(t *testing.T) {
	for _, cmd := range [][]string{{"dump"}, {"confserver"}, {"conf"}, {"analyze"}, {"tsc-server"}, {"tsc-client"},
		{"tsc-round"}, {"gen", "send"}, {"gen", "recv"}, {"gen", "maxrate"}, {"gen", "tuples"}} {
		for _, h := range []string{"--help", "-h"} {
			var out, errb bytes.Buffer
			code := run(append(append([]string(nil), cmd...), h), &out, &errb)
			name := strings.Join(cmd, " ")
			if code != 0 || errb.Len() != 0 {
				t.Errorf("%s %s: exit %d, stderr %q", name, h, code, errb.String())
			}
			if !strings.HasPrefix(out.String(), "Usage of "+name+":") {
				t.Errorf("%s %s: stdout %q", name, h, out.String())
			}
			// Every flag of the command, by name: what flag.PrintDefaults lists.
			for _, f := range flagNames(t, cmd) {
				if !strings.Contains(out.String(), "  -"+f) {
					t.Errorf("%s %s: flag -%s not listed:\n%s", name, h, f, out.String())
				}
			}
			// The top-level usage names analyze's every flag (the one
			// command most users run with many).
			if name == "analyze" {
				for _, f := range flagNames(t, cmd) {
					if f != "cpuprofile" && !strings.Contains(usage, "--"+f) {
						t.Errorf("the usage does not name analyze --%s", f)
					}
				}
			}
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || out.String() != usage || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q", args, code, out.Len(), errb.String())
		}
	}
	for _, args := range [][]string{{"gen", "--help"}, {"gen", "help"}} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 0 || out.String() != genUsage || errb.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 2 || errb.String() != usage {
		t.Errorf("no command: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"bogus"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "bogus"`) {
		t.Errorf("bogus: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"gen", "bogus"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), `unknown subcommand "bogus"`) {
		t.Errorf("gen bogus: exit %d, stderr %q", code, errb.String())
	}
}

// flagNames runs cmd with an unknown flag and reads the flag names from the
// usage the flag package prints with its error: the command's own flag set,
// not a list kept by hand.
func flagNames(t *testing.T, cmd []string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	run(append(append([]string(nil), cmd...), "--no-such-flag-at-all"), &out, &errb)
	var names []string
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			names = append(names, strings.Fields(line[3:])[0])
		}
	}
	if len(names) == 0 {
		t.Fatalf("%v: no flags in its usage:\n%s", cmd, errb.String())
	}
	return names
}

// --version (and version) prints one line on stdout and exits 0: the
// release and the commit (a test binary has none stamped: "unknown";
// tests/install.sh checks the built tool's against git).
func TestVersion(t *testing.T) {
	for _, a := range []string{"--version", "-version", "version"} {
		var out, errb bytes.Buffer
		if code := run([]string{a}, &out, &errb); code != 0 || errb.Len() != 0 {
			t.Fatalf("%s: exit %d, stderr %q", a, code, errb.String())
		}
		if s := out.String(); !strings.HasPrefix(s, "cloudprofiler 0.1.0 (commit ") || strings.Count(s, "\n") != 1 {
			t.Errorf("%s: %q", a, s)
		}
	}
}
