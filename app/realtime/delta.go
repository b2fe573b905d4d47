package realtime

import (
	"fmt"

	"github.com/syncd-dev/syncd/domain/commit"
	"github.com/syncd-dev/syncd/domain/rowcodec"
	"github.com/syncd-dev/syncd/domain/schema"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// section is one registration's part of a delta.
type section struct {
	reg     registration
	commits []commit.Commit
}

// encodeDelta encodes a delta (SPEC §8.2): an SSP2 response with, per
// affected registration, SUB_START, its COMMITs and SUB_END at through,
// in the client's wire version (a wire-1 header carries no epoch).
func encodeDelta(wire uint16, epoch string, secs []section, through int64) ([]byte, error) {
	h := &ssp2.RespHeader{LogEpoch: epoch}
	frames := []ssp2.Frame{h.ForWire(wire)}
	for _, s := range secs {
		frames = append(frames, &ssp2.SubStart{ID: s.reg.id, Status: ssp2.SubActive, EffectiveScopes: ssp2.ScopeListsFromMap(s.reg.effective)})
		for i := range s.commits {
			f, err := commitFrame(&s.commits[i], s.reg.proj)
			if err != nil {
				return nil, err
			}
			frames = append(frames, f)
		}
		frames = append(frames, &ssp2.SubEnd{NextCursor: through})
	}
	return ssp2.Encode(&ssp2.Message{WireVersion: wire, Kind: ssp2.KindResponse, Frames: frames})
}

// commitFrame is a COMMIT frame with a frame-local table dictionary, the
// layout a pull writes; proj, when set, projects the rows onto the
// registration's older schema version (SPEC §9).
func commitFrame(c *commit.Commit, proj *schema.Projection) (*ssp2.Commit, error) {
	f := &ssp2.Commit{CommitSeq: c.Seq, CreatedAtMs: c.CreatedAtMs, ActorID: c.ActorID}
	for i := range c.Changes {
		ch := &c.Changes[i]
		ti := -1
		for j, t := range f.Tables {
			if t == ch.Table {
				ti = j
				break
			}
		}
		if ti < 0 {
			ti = len(f.Tables)
			f.Tables = append(f.Tables, ch.Table)
		}
		out := ssp2.Change{TableIndex: uint16(ti), RowID: ch.RowID, Op: ch.Op, Scopes: ssp2.StoredScopesFromMap(ch.Scopes)}
		if ch.Op == commit.OpUpsert {
			out.RowVersion, out.Row = ch.RowVersion, ch.Row
			if proj != nil && ch.Table == proj.Current().Name {
				row, err := rowcodec.Project(nil, ch.Row, proj)
				if err != nil {
					return nil, fmt.Errorf("project change %s/%s: %w", ch.Table, ch.RowID, err)
				}
				out.Row = row
			}
		}
		f.Changes = append(f.Changes, out)
	}
	return f, nil
}
