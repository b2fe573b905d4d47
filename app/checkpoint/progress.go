package checkpoint

import (
	"sync"
	"time"

	"github.com/syncd-dev/syncd/app/events"
	cpdomain "github.com/syncd-dev/syncd/domain/checkpoint"
	"github.com/syncd-dev/syncd/ports"
)

// ProgressHooks is the runner's progress callback (Options.OnProgress): the host's hook and,
// when something listens, checkpoint.progress events timed from each
// run's claim; nil when neither is there.
func ProgressHooks(host func(Progress), sink ports.EventSink, now func() time.Time) func(Progress) {
	if sink == nil {
		if host == nil {
			return nil
		}
		return host
	}
	var mu sync.Mutex
	runs := map[[2]string]func(cpdomain.Checkpoint, int64){}
	return func(pr Progress) {
		if host != nil {
			host(pr)
		}
		key := [2]string{pr.Partition, pr.Name}
		mu.Lock()
		report, ok := runs[key]
		if !ok || pr.Phase == PhaseClaimed {
			report = events.CheckpointReporter(sink, now)
			runs[key] = report
		}
		if pr.Phase == PhaseActivated || pr.Phase == PhaseSuperseded {
			delete(runs, key) // the run ended
		}
		mu.Unlock()
		report(pr.Checkpoint, pr.TargetSeq)
	}
}
