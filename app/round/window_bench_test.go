package round_test

import (
	"fmt"
	"testing"

	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/test/ssptest"
)

// BenchmarkWindowPushPull is one client's push of a task edit and another
// client's incremental pull of it, both at the current version (3) or
// both at the older version the window serves (2): what serving an
// older client costs over a current one (decode, projection).
func BenchmarkWindowPushPull(b *testing.B) {
	for _, v := range []int32{3, 2} {
		b.Run(fmt.Sprintf("version=%d", v), func(b *testing.B) {
			e := newWindowEnv(b, nil)
			sch := e.w.View(v).Schema()
			for i := range 10 {
				id := fmt.Sprint("t-", i)
				c := ssptest.Cols{"id": rowcodec.String(id), "project_id": rowcodec.String("pr-1"), "title": rowcodec.String(id),
					"done": rowcodec.Bool(false), "estimate": rowcodec.Int(int64(i)), "attachment": rowcodec.Null()}
				if v == 3 {
					c["priority"] = rowcodec.Int(1)
				}
				e.Must(e.at("w", v, ssptest.Commit("seed-"+id, ssptest.Upsert("tasks", id, e.task(sch, c), -1))))
			}
			cursor := pullCursor(b, e, v, -1)
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				id := fmt.Sprint("t-", i%10)
				payload := e.task(sch, ssptest.Cols{"id": rowcodec.String(id), "title": rowcodec.String(fmt.Sprint("edit ", i))})
				resp, _ := e.Must(e.at("w", v, ssptest.Commit(fmt.Sprint("e-", i), ssptest.Upsert("tasks", id, payload, -1))))
				if resp.Results[0].Status != ssp2.PushApplied {
					b.Fatalf("push %+v", resp.Results[0])
				}
				cursor = pullCursor(b, e, v, cursor)
			}
		})
	}
}

// pullCursor pulls the tasks of client r at version v from cursor and
// returns its next cursor, decoding every row it was sent.
func pullCursor(b testing.TB, e *windowEnv, v int32, cursor int64) int64 {
	msg, err := e.pull("r", v, "tasks", cursor)
	if err != nil {
		b.Fatal(err)
	}
	codec := rowcodec.New(e.w.View(v).Schema().Table("tasks"))
	var vals []rowcodec.Value
	next := int64(-2)
	for _, f := range msg.Frames {
		switch f := f.(type) {
		case *ssp2.Commit:
			for _, ch := range f.Changes {
				if vals, err = codec.DecodeRow(ch.Row, vals); err != nil {
					b.Fatal(err)
				}
			}
		case *ssp2.SubEnd:
			next = f.NextCursor
		}
	}
	if next < 0 {
		b.Fatalf("no SUB_END: %+v", msg.Frames)
	}
	return next
}
