package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The HTTP floor: engine-commit's commit and read, each behind one HTTP
// request to the thinnest server net/http makes (`syncload engine-serve`,
// its own process, like an SSP2 server). What one client's push-pull pair
// costs there is the least any HTTP server on this machine can answer a
// pair in, so it separates what the protocol's transport costs from what
// an SSP2 server adds to it.

// engineServe runs `syncload engine-serve [flags]` until ctx ends.
func engineServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("syncload engine-serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8787", "address to serve POST /engine/commit?id=N and GET /engine/read?id=N on")
	dsn := fs.String("engine-database", "", "the database to commit on (a SQLite file path or a postgres:// URL)")
	conns := fs.Int("conns", 8, "database connections")
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "Usage: syncload engine-serve --engine-database DB [--listen ADDR] [--conns N]\n\n"+
			"Serves the storage engine's commit and read over HTTP, for the engine-http scenario.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *conns < 1 {
		_, _ = fmt.Fprintln(stderr, "syncload engine-serve: --conns must be at least 1")
		return 2
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	en, err := openEngine(ctx, *dsn, *conns, hex.EncodeToString(b[:]))
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload engine-serve: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload engine-serve: %v\n", err)
		return 2
	}
	srv := &http.Server{Handler: en.handler(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	_, _ = fmt.Fprintf(stdout, "engine-serve: listening on %s\n", ln.Addr())
	select {
	case <-ctx.Done():
	case err = <-done:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = errors.Join(err, srv.Shutdown(sctx))
	if _, derr := en.db.ExecContext(sctx, "DROP TABLE "+en.table); derr != nil {
		err = errors.Join(err, derr)
	}
	if err = errors.Join(err, en.db.Close()); err != nil {
		_, _ = fmt.Fprintf(stderr, "syncload engine-serve: %v\n", err)
		return 1
	}
	return 0
}

// handler serves engine-commit's two statements, one request each.
func (en *engineDB) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /engine/commit", func(w http.ResponseWriter, r *http.Request) {
		id, ok := engineID(w, r)
		if !ok {
			return
		}
		if err := en.commit(r.Context(), id); err != nil {
			http.Error(w, "commit failed", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /engine/read", func(w http.ResponseWriter, r *http.Request) {
		id, ok := engineID(w, r)
		if !ok {
			return
		}
		v, err := en.read(r.Context(), id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			http.Error(w, "no such id", http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, "read failed", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, strconv.FormatInt(v, 10))
	})
	return mux
}

func engineID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil {
		http.Error(w, "want ?id=N", http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

// commit is one single-row committing transaction.
func (en *engineDB) commit(ctx context.Context, id int64) error {
	tx, err := en.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, en.q("INSERT INTO "+en.table+"(id, v, payload) VALUES (?, ?, ?)"), id, id, "engine-commit"); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// read is the one-row read back of id.
func (en *engineDB) read(ctx context.Context, id int64) (int64, error) {
	var v int64
	err := en.db.QueryRowContext(ctx, en.q("SELECT v FROM "+en.table+" WHERE id=?"), id).Scan(&v)
	return v, err
}

// engineHTTP drives engine-serve: each step POSTs a commit and GETs it back.
func engineHTTP() *scenario {
	return &scenario{
		name: "engine-http",
		about: "no SSP2 server: each client POSTs {url}/engine/commit?id=N then GETs {url}/engine/read?id=N on " +
			"`syncload engine-serve` (engine-commit's commit and read behind the thinnest net/http server): " +
			"the least any HTTP server on this machine answers one push-pull pair in",
		kinds: []string{"commit", "read"},
		prepare: func(ctx context.Context, e *env) error {
			t, ok := e.t.(*httpTransport)
			if !ok {
				return errors.New("engine-http needs the HTTP transport")
			}
			e.floor = t.http
			e.note("engine", "http floor")
			return nil
		},
		step: func(ctx context.Context, e *env, v *vu) error {
			v.n++
			id := int64(v.idx)<<40 | v.n
			base := strings.TrimRight(e.o.url, "/") + "/engine/"
			if err := e.timed(ctx, "commit", func() (int, int, error) {
				return e.floorCall(ctx, http.MethodPost, base+"commit?id="+strconv.FormatInt(id, 10), http.StatusNoContent, "")
			}); err != nil {
				return err
			}
			return e.timed(ctx, "read", func() (int, int, error) {
				return e.floorCall(ctx, http.MethodGet, base+"read?id="+strconv.FormatInt(id, 10), http.StatusOK, strconv.FormatInt(id, 10))
			})
		},
	}
}

// floorCall sends one engine-serve request and checks its answer.
func (e *env) floorCall(ctx context.Context, method, url string, status int, want string) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, 0, err
	}
	res, err := e.floor.Do(req)
	if err != nil {
		return 0, 0, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	switch {
	case err != nil:
		return 0, 0, err
	case res.StatusCode != status:
		return 0, 0, fmt.Errorf("%s %s: status %d", method, url, res.StatusCode)
	case string(body) != want:
		return 0, 0, fmt.Errorf("%s %s: read back %q, wrote %s", method, url, body, want)
	}
	return len(body), 1, nil
}
