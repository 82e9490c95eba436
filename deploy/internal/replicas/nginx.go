package replicas

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// NginxPath is Debian's nginx, which .ci/run and make deps install.
const NginxPath = "/usr/sbin/nginx"

// UpstreamHeader names the replica (host:port) that answered through
// nginx (NginxOptions.Fast aside), so that a client knows which one
// acknowledged a write.
const UpstreamHeader = "X-Berm-Upstream"

// NginxOptions are how nginx is started.
type NginxOptions struct {
	// Bin is nginx; NginxPath when empty.
	Bin string
	// Dir holds its configuration, logs and temporary files.
	Dir string
	// Upstreams are the replicas' host:port, balanced round robin.
	Upstreams []string
	// Fast takes the settings of deploy/nginx.conf that matter to speed:
	// kept-alive upstream connections, a worker per core, no access log.
	// Its workers are the one thing that can outlive the program that
	// started nginx, when that program is killed with no chance to Stop it.
	// Without it nginx keeps no idle upstream connection: a killed
	// replica's kept-alive connections would make the first requests after
	// the kill fail for a reason that is nginx's, not berm's; a fresh
	// connection to a dead port is refused at once and nginx passes the
	// request (not yet sent) to the next replica. It also names the replica
	// that answered in UpstreamHeader and logs it in access.log.
	Fast bool
}

// Balancer is nginx, round robin over replicas.
type Balancer struct {
	process
	URL string // http://127.0.0.1:PORT
	Dir string
	out lockedBuffer
}

// StartNginx starts nginx and returns once it accepts connections; Stop
// ends it. A port taken between its pick and nginx's bind is picked again.
func StartNginx(ctx context.Context, opts NginxOptions) (*Balancer, error) {
	if opts.Bin == "" {
		opts.Bin = NginxPath
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		b, err := startNginx(ctx, opts)
		if err == nil {
			return b, nil
		}
		var exited *exitError
		if attempt < 5 && errors.As(err, &exited) && addrInUse(exited.log) {
			continue
		}
		return nil, err
	}
}

func startNginx(ctx context.Context, opts NginxOptions) (*Balancer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(nginxConf(dir, addr, opts)), 0o644); err != nil {
		return nil, err
	}
	pidPath := filepath.Join(dir, "nginx.pid")
	os.Remove(pidPath) // a failed attempt's
	errorLog := filepath.Join(dir, "error.log")
	os.Remove(errorLog)
	b := &Balancer{URL: "http://" + addr, Dir: dir}
	cmd := exec.Command(opts.Bin, "-e", errorLog, "-p", dir, "-c", confPath, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = &b.out, &b.out
	if err := b.start(cmd, nil); err != nil {
		return nil, fmt.Errorf("start nginx: %w", err)
	}
	// nginx writes its pid file once its sockets are bound: a port that
	// answers before that may be someone else's.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid, err := os.ReadFile(pidPath); err == nil && strings.TrimSpace(string(pid)) == strconv.Itoa(b.Pid()) {
			break
		}
		select {
		case <-b.exited:
			err := &exitError{err: b.err, log: b.Log()}
			return nil, fmt.Errorf("nginx: %w", err)
		case <-ctx.Done():
			b.Stop()
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("nginx wrote no pid file in 10 s:\n%s", b.Log())
		}
	}
	if err := waitDial(ctx, &b.process, addr, time.Until(deadline)+time.Second, b.Log); err != nil {
		b.Stop()
		return nil, fmt.Errorf("nginx: %w", err)
	}
	return b, nil
}

func nginxConf(dir, addr string, opts NginxOptions) string {
	user := ""
	if os.Geteuid() == 0 {
		// Workers would run as nobody, who cannot enter the temporary
		// directories.
		user = "user root;"
	}
	// The test's settings, then the benchmark's. The test's nginx is one
	// process (master_process off): the kernel's SIGKILL at the test
	// binary's death reaches it, where a worker, forked without the
	// parent-death signal, would outlive it holding the port.
	workers, connections := "1;\nmaster_process off", "1024"
	accessLog := "log_format upstream '$request $status $upstream_addr $upstream_status';\n\taccess_log " + dir + "/access.log upstream;"
	server, keepalive := "", ""
	location := "add_header " + UpstreamHeader + " $upstream_addr always;"
	if opts.Fast {
		workers, connections = "auto", "4096"
		accessLog = "access_log off;"
		server = " max_fails=1 fail_timeout=5s"
		keepalive = "\t\tkeepalive 32;\n"
		location = "proxy_set_header Connection \"\";\n\t\t\tproxy_request_buffering off;"
	}
	var upstreams strings.Builder
	for _, u := range opts.Upstreams {
		fmt.Fprintf(&upstreams, "\t\tserver %s%s;\n", u, server)
	}
	return fmt.Sprintf(`%[1]s
worker_processes %[2]s;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log warn;
events { worker_connections %[4]s; }
http {
	%[5]s
	client_body_temp_path %[3]s/body;
	proxy_temp_path %[3]s/proxy;
	fastcgi_temp_path %[3]s/fastcgi;
	uwsgi_temp_path %[3]s/uwsgi;
	scgi_temp_path %[3]s/scgi;
	upstream berm {
%[6]s%[7]s	}
	server {
		listen %[8]s;
		location / {
			proxy_pass http://berm;
			proxy_http_version 1.1;
			# berm answers only loopback names on loopback (DNS rebinding):
			# pass the client's Host, not "berm".
			proxy_set_header Host $http_host;
			# Streamable HTTP answers with server-sent events.
			proxy_buffering off;
			proxy_read_timeout 1h;
			%[9]s
		}
	}
}
`, user, workers, dir, connections, accessLog, upstreams.String(), keepalive, addr, location)
}

// Addr is nginx's host:port.
func (b *Balancer) Addr() string { return strings.TrimPrefix(b.URL, "http://") }

// Log is nginx's error.log and its own output.
func (b *Balancer) Log() string {
	logs, _ := os.ReadFile(filepath.Join(b.Dir, "error.log"))
	return string(logs) + b.out.String()
}

// Stop ends nginx with SIGTERM (its fast shutdown: the workers go with the
// master), and SIGKILL to its group if it lingers past 5 s; it returns once
// nginx is reaped.
func (b *Balancer) Stop() { b.stop(5 * time.Second) }
