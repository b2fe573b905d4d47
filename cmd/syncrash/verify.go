package main

import (
	"context"
	"fmt"

	"github.com/syncd-dev/syncd/client"
	"github.com/syncd-dev/syncd/domain/ssp2"
)

// logSub is the verifier's subscription: the client's own rows.
const logSub = "log"

// verify checks what the last server holds against the ledger. Across
// clients no two acknowledged commits share a seq; per client:
//
//  1. the log, pulled from cursor 0, holds every row of every acknowledged
//     commit exactly once, in the log commit of the acknowledged seq
//     (so a commit is whole or absent), and no row of an unknown commit;
//  2. each row reads back with its commit's title at row version 1;
//  3. pushing every acknowledged commit again is answered cached with the
//     acknowledged seq;
//  4. those replays wrote nothing: the log did not grow.
//
// Commits that were in flight at a kill were delivered again until
// answered, so they are in the ledger with the answer they got.
func (r *runner) verify(ctx context.Context) {
	seqOf := map[int64]string{}
	for _, c := range r.clients {
		for _, cm := range c.commits {
			if other, dup := seqOf[cm.seq]; dup {
				r.violate("commits %s and %s were both acknowledged at seq %d", other, cm.id, cm.seq)
			}
			seqOf[cm.seq] = cm.id
		}
	}
	for _, c := range r.clients {
		if err := r.verifyClient(ctx, c); err != nil {
			r.violate("client %s: %v", c.id, err)
		}
	}
}

func (r *runner) verifyClient(ctx context.Context, c *crashClient) error {
	sc, err := r.newClient(c)
	if err != nil {
		return err
	}
	// The epoch first: acquiring it resets every cursor.
	if err := sc.AcquireEpoch(ctx); err != nil {
		return err
	}
	sc.Subscribe(logSub, table, map[string][]string{"owner_id": {c.actor}}).Cursor = 0
	logged, err := readLog(ctx, sc)
	if err != nil {
		return fmt.Errorf("reading the log: %w", err)
	}
	known := map[string]bool{}
	for _, cm := range c.commits {
		for _, row := range cm.rows {
			known[row] = true
			seqs := logged[row]
			switch {
			case len(seqs) == 0:
				r.violate("commit %s, acknowledged %v at seq %d: row %s is not in the log", cm.id, cm.status, cm.seq, row)
				continue
			case len(seqs) > 1:
				r.violate("commit %s: row %s was written by %d log commits %v, want exactly one", cm.id, row, len(seqs), seqs)
			case seqs[0] != cm.seq:
				r.violate("commit %s, acknowledged at seq %d: row %s is in the log at seq %d", cm.id, cm.seq, row, seqs[0])
			}
			vals, version, ok := sc.Get(table, row)
			switch {
			case !ok:
				r.violate("commit %s: row %s does not read back", cm.id, row)
			case version != 1 || vals["title"].Text() != cm.id:
				// Every row is written by one commit only: version 1.
				r.violate("commit %s: row %s reads back at row version %d titled %q, want version 1 titled by its commit",
					cm.id, row, version, vals["title"].Text())
			}
		}
	}
	for row, seqs := range logged {
		if !known[row] {
			r.violate("row %s is in the log (seqs %v) but no acknowledged commit wrote it", row, seqs)
		}
	}
	if err := r.replay(ctx, c); err != nil {
		return fmt.Errorf("replaying: %w", err)
	}
	res, err := sc.Pull(ctx)
	if err != nil {
		return fmt.Errorf("reading the log after the replays: %w", err)
	}
	if n := res.Sections[logSub].Commits; n != 0 {
		r.violate("client %s: replaying acknowledged commits wrote %d new commits", c.id, n)
	}
	return nil
}

// readLog pulls the subscription from its cursor until no commit comes,
// returning the seqs of the log commits that wrote each row.
func readLog(ctx context.Context, sc *client.Client) (map[string][]int64, error) {
	logged := map[string][]int64{}
	for round := 0; ; round++ {
		if round == 100_000 {
			return nil, fmt.Errorf("the log did not end after %d pulls", round)
		}
		res, err := sc.Pull(ctx)
		if err != nil {
			return nil, err
		}
		sec := res.Sections[logSub]
		if sec.Err != nil {
			return nil, sec.Err
		}
		if sec.Bootstrap || sec.Status != ssp2.SubActive {
			return nil, fmt.Errorf("the log from cursor 0 was not served incrementally (status %v, bootstrap %v, %s)", sec.Status, sec.Bootstrap, sec.Reason)
		}
		for _, f := range res.Message.Frames {
			if cf, ok := f.(*ssp2.Commit); ok {
				for _, ch := range cf.Changes {
					logged[ch.RowID] = append(logged[ch.RowID], cf.CommitSeq)
				}
			}
		}
		if sec.Commits == 0 {
			return logged, nil
		}
	}
}

// replay pushes every acknowledged commit of c again, in batches that fit
// the server's operations limit, and checks each answer.
func (r *runner) replay(ctx context.Context, c *crashClient) error {
	rc, err := r.newClient(c)
	if err != nil {
		return err
	}
	batch := max(1, 400/max(1, r.cfg.Ops))
	for start := 0; start < len(c.commits); start += batch {
		part := c.commits[start:min(start+batch, len(c.commits))]
		for _, cm := range part {
			ops, err := r.operations(rc, c, cm)
			if err != nil {
				return err
			}
			rc.QueueWithID(cm.id, ops...)
		}
		res, err := rc.Push(ctx)
		if err != nil {
			return err
		}
		got := map[string]*ssp2.PushResult{}
		for _, p := range res.Pushes {
			got[p.ClientCommitID] = p
		}
		for _, cm := range part {
			p := got[cm.id]
			switch {
			case p == nil:
				r.violate("replay of %s: no PUSH_RESULT", cm.id)
			case p.Status != ssp2.PushCached || p.CommitSeq != cm.seq:
				r.violate("replay of %s, acknowledged %v at seq %d: answered %v at seq %d, want cached at seq %d",
					cm.id, cm.status, cm.seq, p.Status, p.CommitSeq, cm.seq)
			}
		}
	}
	return nil
}
