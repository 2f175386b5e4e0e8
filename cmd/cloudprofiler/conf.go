package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"cloudprofiler/confserver"
)

// token reads the bearer token: --token-file, else $CP_CONF_TOKEN.
func token(file string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv("CP_CONF_TOKEN"), nil
}

// runConfServer: cloudprofiler confserver --listen ADDR --config FILE [--token-file F]
func runConfServer(stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("confserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:7070", "address to listen on")
	config := fs.String("config", "", "rules file (JSON; created if missing)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token for writes (default: $CP_CONF_TOKEN; none: read-only)")
	var lim confserver.Limits
	fs.IntVar(&lim.MaxConns, "max-conns", 1024, "connections open at once (the one waiting longest for its client is closed to make room)")
	fs.DurationVar(&lim.ReadHeaderTimeout, "header-timeout", 5*time.Second, "a request's headers must arrive within this")
	fs.DurationVar(&lim.ReadTimeout, "read-timeout", 15*time.Second, "a whole request, headers and body, must arrive within this")
	fs.DurationVar(&lim.WriteTimeout, "write-timeout", 30*time.Second, "writing an answer (a watch gets its wait on top)")
	fs.DurationVar(&lim.IdleTimeout, "idle-timeout", 60*time.Second, "a kept-alive connection without a request for this long is closed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if lim.MaxConns < 1 || lim.ReadHeaderTimeout <= 0 || lim.ReadTimeout <= 0 || lim.WriteTimeout <= 0 || lim.IdleTimeout <= 0 {
		return errors.New("confserver: --max-conns and the timeouts must be > 0")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("confserver: unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *config == "" {
		return errors.New("confserver: --config FILE is required")
	}
	tok, err := token(*tokenFile)
	if err != nil {
		return err
	}
	store, err := confserver.Open(*config)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &confserver.Server{Store: store, Token: tok, Limits: lim}
	t, _ := store.Snapshot()
	writes := "writes need the bearer token"
	if tok == "" {
		writes = "no token: read-only"
	}
	fmt.Fprintf(stderr, "confserver: listening on %s, %d rules (version %d) from %s, %s\n",
		ln.Addr(), len(t.Rules), t.Version, *config, writes)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return srv.Serve(ctx, ln)
}

// runConf: cloudprofiler conf list|get ID|set RULE-JSON|delete ID|resolve NAME --server ADDR
func runConf(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("conf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", os.Getenv("CP_CONF_SERVER"), "server host:port (default $CP_CONF_SERVER)")
	tokenFile := fs.String("token-file", "", "bearer token file (default $CP_CONF_TOKEN)")
	host := fs.String("host", "", "resolve: the host asking")
	pid := fs.Int("pid", 0, "resolve: the pid asking")
	usage := "usage: cloudprofiler conf [--server ADDR] list | get ID | set 'RULE-JSON' | delete ID | resolve NAME"
	// Flags may stand anywhere: before the verb, after it, after its argument.
	var pos []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) == 0 {
		return errors.New(usage)
	}
	verb := pos[0]
	pos = pos[1:]
	if *server == "" {
		return errors.New("conf: no server: give --server or set CP_CONF_SERVER")
	}
	tok, err := token(*tokenFile)
	if err != nil {
		return err
	}
	c := &confserver.Client{Addr: *server, Token: tok, HTTP: &http.Client{Timeout: 10 * time.Second}}
	ctx := context.Background()
	var out any
	switch {
	case verb == "list" && len(pos) == 0:
		out, err = c.Rules(ctx)
	case verb == "get" && len(pos) == 1:
		out, err = c.Rule(ctx, pos[0])
	case verb == "set" && len(pos) == 1:
		var r confserver.Rule
		dec := json.NewDecoder(strings.NewReader(pos[0]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("conf set: rule JSON: %v", err)
		}
		if dec.More() {
			return errors.New("conf set: rule JSON: data after the rule")
		}
		out, err = c.SetRule(ctx, r)
	case verb == "delete" && len(pos) == 1:
		out, err = c.DeleteRule(ctx, pos[0])
	case verb == "resolve" && len(pos) == 1:
		out, err = c.Resolve(ctx, confserver.Channel{Name: pos[0], Host: *host, PID: *pid})
	default:
		return errors.New(usage)
	}
	if err != nil {
		return fmt.Errorf("conf %s: %v", verb, err)
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
