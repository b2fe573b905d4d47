package ssp2_test

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/syncd-dev/syncd/domain/ssp2"
)

func TestPushResultDetailsRoundTripAndRendering(t *testing.T) {
	m := &ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: []ssp2.Frame{
		&ssp2.RespHeader{LogEpoch: "e"},
		&ssp2.PushResult{ClientCommitID: "c1", Status: ssp2.PushRejected, Results: []ssp2.OpResult{{OpIndex: 2, Status: ssp2.OpError, Code: "app.bad", Message: "no"}}},
		&ssp2.PushResultDetails{ClientCommitID: "c1", Entries: []ssp2.DetailEntry{{OpIndex: 2, Details: ssp2.RejectionDetails{
			FieldPaths: []string{"title", "meta.tags"}, Reason: "too_long", RequiredAction: "edit_fields",
			References: []ssp2.ScopeValue{{Key: "task_id", Value: "t1"}, {Key: "project_id", Value: "p1"}},
		}}}},
	}}
	enc, err := ssp2.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`{"fieldPaths":["title","meta.tags"],"reason":"too_long","requiredAction":"edit_fields","references":{"project_id":"p1","task_id":"t1"}}`)) {
		t.Fatalf("details not normalized: %q", enc)
	}
	dec, err := ssp2.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	re, err := ssp2.Encode(dec)
	if err != nil || !bytes.Equal(re, enc) {
		t.Fatalf("round trip: %v", err)
	}
	out := string(ssp2.RenderJSON(dec))
	if !strings.Contains(out, `"type": "PUSH_RESULT_DETAILS"`) || !strings.Contains(out, `"requiredAction": "edit_fields"`) {
		t.Fatalf("rendering: %s", out)
	}
}

func TestRejectionDetailsNormalizeRefusesOutOfShapeValues(t *testing.T) {
	long := strings.Repeat("a", 97)
	cases := map[string]ssp2.RejectionDetails{
		"empty":              {},
		"empty-field-paths":  {FieldPaths: []string{}},
		"bad-path":           {FieldPaths: []string{"a..b"}},
		"duplicate-path":     {FieldPaths: []string{"a", "a"}},
		"bad-token":          {Reason: "Bad"},
		"long-token":         {Reason: long},
		"token-trailing-sep": {Reason: "a_"},
		"ref-untrimmed":      {References: []ssp2.ScopeValue{{Key: "k", Value: " v"}}},
		"ref-control":        {References: []ssp2.ScopeValue{{Key: "k", Value: "a\x01"}}},
		"ref-empty-set":      {References: []ssp2.ScopeValue{}},
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := d.Normalize(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestScopeHelpersAreCanonical(t *testing.T) {
	s := ssp2.ScopeListsFromMap(map[string][]string{"\uff61": {"x"}, "\U0001F600": {"y"}, "a": {"z"}})
	if s[0].Key != "a" || s[1].Key != "\U0001F600" || s[2].Key != "\uff61" {
		t.Fatalf("order %v", s)
	}
	if v, ok := s.Get("a"); !ok || v[0] != "z" {
		t.Fatal("Get")
	}
	if d := (ssp2.ScopeLists{{Key: "project", Values: []string{"p1"}}}).Digest(); d != "5a993aa4d503af6f5dc77acc12ad399ff2e9d933c393f4de6af5f6aef4fa2977" {
		t.Fatalf("digest %s", d)
	}
	st := ssp2.StoredScopesFromMap(map[string]string{"b": "2", "a": "1"})
	if st[0].Key != "a" {
		t.Fatal("stored scopes not sorted")
	}
	if v, ok := st.Get("b"); !ok || v != "2" {
		t.Fatal("Get")
	}
}

// COMMIT frames of one message share the decoder's chunks; each frame's
// tables, changes and scopes are its own: appending to one reaches no
// other, through either decoder.
func TestDecodedCommitsStayApart(t *testing.T) {
	var frames []ssp2.Frame
	frames = append(frames, &ssp2.RespHeader{LogEpoch: "e"}, &ssp2.SubStart{ID: "s", Status: ssp2.SubActive})
	for i := range 40 { // past the first chunks
		id := string(rune('a' + i%26))
		frames = append(frames, &ssp2.Commit{CommitSeq: int64(i + 1), ActorID: "w", Tables: []string{"t" + id},
			Changes: []ssp2.Change{{RowID: id, Op: ssp2.OpDelete, Scopes: ssp2.StoredScopesFromMap(map[string]string{"k": id, "l": id})}}})
	}
	frames = append(frames, &ssp2.SubEnd{NextCursor: 40})
	b, err := ssp2.Encode(&ssp2.Message{WireVersion: 3, Kind: ssp2.KindResponse, Frames: frames})
	if err != nil {
		t.Fatal(err)
	}
	decoders := map[string]func() []ssp2.Frame{
		"whole message": func() []ssp2.Frame {
			m, err := ssp2.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			return m.Frames
		},
		"streaming": func() []ssp2.Frame {
			d := ssp2.NewDecoder(bytes.NewReader(b), ssp2.DecodeOptions{})
			var out []ssp2.Frame
			for {
				f, err := d.Next()
				if errors.Is(err, io.EOF) {
					return out
				}
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, f)
			}
		},
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			var commits []*ssp2.Commit
			for _, f := range decode() {
				if c, ok := f.(*ssp2.Commit); ok {
					commits = append(commits, c)
				}
			}
			for _, c := range commits {
				_ = append(c.Tables, "x")
				_ = append(c.Changes, ssp2.Change{RowID: "x"})
				_ = append(c.Changes[0].Scopes, ssp2.ScopeValue{Key: "x", Value: "x"})
			}
			for i, c := range commits {
				want := frames[i+2].(*ssp2.Commit)
				if c.CommitSeq != want.CommitSeq || !slices.Equal(c.Tables, want.Tables) || len(c.Changes) != 1 ||
					c.Changes[0].RowID != want.Changes[0].RowID || !slices.Equal(c.Changes[0].Scopes, want.Changes[0].Scopes) {
					t.Fatalf("commit %d decoded as %+v, want %+v", i, c, want)
				}
			}
		})
	}
}
