package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealth(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ready":true,"phase":"ready"}`))
	})
	mux.HandleFunc("GET /draining/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ready":false,"reason":"draining"}`))
	})
	// Answers only when the client gives up: the timeout decides.
	mux.HandleFunc("GET /hang/readyz", func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	closed := httptest.NewServer(mux)
	closed.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := strings.Cut(addr, ":")

	tests := []struct {
		name   string
		args   []string
		env    []string
		code   int
		stdout string
		stderr string
	}{
		{"ready", []string{"--url", srv.URL + "/readyz"}, nil, 0, "ready", ""},
		{"503 draining", []string{"--url", srv.URL + "/draining/readyz"}, nil, 1, "", "503 Service Unavailable: {\"ready\":false,\"reason\":\"draining\"}"},
		{"no answer within the timeout", []string{"--url", srv.URL + "/hang/readyz", "--timeout", "50ms"}, nil, 1, "", "not ready"},
		{"nothing listening", []string{"--url", closed.URL + "/readyz"}, nil, 1, "", "not ready"},
		{"404", []string{"--url", srv.URL + "/nope"}, nil, 1, "", "404"},
		{"the admin address from the environment", nil, []string{"SYNCD_ADMIN_LISTEN=" + addr}, 0, "ready", ""},
		{"an unspecified host is dialed on loopback", []string{"--timeout", "2s"}, []string{"SYNCD_ADMIN_LISTEN=0.0.0.0:" + port}, 0, "ready", ""},
		{"a stray argument", []string{"now"}, nil, 2, "", "takes only"},
		{"a zero timeout", []string{"--timeout", "0s"}, nil, 2, "", "takes only"},
		{"a bad flag", []string{"--bogus"}, nil, 2, "", "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runHealth(tt.args, tt.env, &out, &errOut)
			if code != tt.code || !strings.Contains(out.String(), tt.stdout) || !strings.Contains(errOut.String(), tt.stderr) {
				t.Fatalf("code %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
			}
		})
	}
}

func TestDialable(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"127.0.0.1:8788", "127.0.0.1:8788"},
		{"0.0.0.0:8788", "127.0.0.1:8788"},
		{":8788", "127.0.0.1:8788"},
		{"[::]:8788", "127.0.0.1:8788"},
		{"[::1]:8788", "[::1]:8788"},
		{"admin.internal:9000", "admin.internal:9000"},
	}
	for _, tt := range tests {
		if got := dialable(tt.listen); got != tt.want {
			t.Errorf("dialable(%q) = %q, want %q", tt.listen, got, tt.want)
		}
	}
}
