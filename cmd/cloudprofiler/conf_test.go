package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cloudprofiler/confserver"

	"github.com/stretchr/testify/require"
)

// The test binary doubles as the command: with CP_TEST_MAIN=1 it runs main.
func TestMain(m *testing.M) {
	if os.Getenv("CP_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "CP_TEST_MAIN=1"), env...)
	return cmd
}

// A real confserver process on loopback, driven by `cloudprofiler conf`.
func TestConfCommandAgainstARealServer(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok-123\n"), 0o600))
	rules := filepath.Join(dir, "rules.json")
	srv := command(nil, "confserver", "--listen", "127.0.0.1:0", "--config", rules, "--token-file", tokenFile)
	stderr, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	defer func() { srv.Process.Kill(); srv.Wait() }()
	line, err := bufio.NewReader(stderr).ReadString('\n')
	require.NoError(t, err)
	addr := strings.Fields(strings.SplitN(line, "listening on ", 2)[1])[0]
	addr = strings.TrimSuffix(addr, ",")

	run := func(env []string, args ...string) (string, error) {
		out, err := command(env, append([]string{"conf", "--server", addr}, args...)...).Output()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(ee.Stderr), err
		}
		return string(out), err
	}
	tok := []string{"CP_CONF_TOKEN=tok-123"}

	out, err := run(nil, "set", `{"id":"m","name":"map*","handler":"XOY","args":[2]}`)
	require.Error(t, err, "no token")
	require.Contains(t, out, "401")
	out, err = run([]string{"CP_CONF_TOKEN=wrong"}, "set", `{"id":"m","name":"map*","handler":"XOY"}`)
	require.Error(t, err)
	require.Contains(t, out, "wrong bearer token")

	_, err = run(tok, "set", `{"id":"m","name":"map*","handler":"XOY","args":[2]}`)
	require.NoError(t, err)
	out, err = run(tok, "set", `{"id":"bad","name":"x","handler":"XOY","args":[9,3]}`)
	require.Error(t, err)
	require.Contains(t, out, "x <= y")
	out, err = run(tok, "set", `{"id":"bad","name":"x","handler":"NOPE"}`)
	require.Error(t, err)
	require.Contains(t, out, "unknown handler")

	out, err = run(nil, "resolve", "map 3", "--pid", "12")
	require.NoError(t, err)
	var d confserver.Decision
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	require.Equal(t, "XOY", d.Handler)
	require.Equal(t, []int64{2, 1024}, d.Args)

	out, err = run(nil, "list")
	require.NoError(t, err)
	var tab confserver.Table
	require.NoError(t, json.Unmarshal([]byte(out), &tab))
	require.Len(t, tab.Rules, 1)

	_, err = run(tok, "delete", "m")
	require.NoError(t, err)
	out, err = run(nil, "get", "m")
	require.Error(t, err)
	require.Contains(t, out, "404")

	// The limits' flags are checked.
	bad := command(nil, "confserver", "--listen", "127.0.0.1:0", "--config", rules, "--max-conns", "0")
	msg, err := bad.CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(msg), "--max-conns and the timeouts must be > 0")

	// What the server wrote is a valid table.
	onDisk, err := confserver.Open(rules)
	require.NoError(t, err)
	got, _ := onDisk.Snapshot()
	require.Empty(t, got.Rules)
}
