package round

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/domain/ssp2"
	"github.com/syncd-dev/syncd/domain/syncerr"
)

// VersionLogInterval is how often a refused wire version is logged at
// warn, per version: enough for an operator to see a fleet of old clients,
// never a line per request.
const VersionLogInterval = time.Minute

// versionLog rate-limits the warn lines of refused wire versions.
type versionLog struct {
	mu sync.Mutex
	// by holds one entry per servable version and one (key 0) for every
	// other, so the map stays bounded whatever versions clients send.
	by map[uint16]*versionLogEntry
}

type versionLogEntry struct {
	last       time.Time
	suppressed int
}

// refuseVersion answers a decode error that is a refused wire version
// with a message naming the request's version, the admitted ones and the
// setting that decides them, and logs it at warn at most once per
// VersionLogInterval per version. Other errors pass through unchanged.
func (s *Service) refuseVersion(err error) error {
	var ve *ssp2.VersionError
	if !errors.As(err, &ve) {
		return err
	}
	admitted := versionList(s.versions)
	msg := fmt.Sprintf("wire version %d is not supported: this server admits wire %s (set by its --min-wire-version)", ve.Version, admitted)
	if ve.Version >= LowestMinWireVersion && ve.Version < s.o.MinWireVersion {
		msg = fmt.Sprintf("wire version %d is not admitted: this server admits wire %s; started with --min-wire-version %d it would admit wire-%d clients",
			ve.Version, admitted, ve.Version, ve.Version)
	}
	s.logVersion(ve.Version)
	return syncerr.Wrap(syncerr.InvalidRequest, err).WithMessage(msg).WithDetails(map[string]any{
		"wireVersion": ve.Version, "admittedWireVersions": s.versions,
	})
}

func (s *Service) logVersion(v uint16) {
	key := v
	if v < LowestMinWireVersion || v > MaxWireVersion {
		key = 0
	}
	now := s.o.Now()
	s.vlog.mu.Lock()
	if s.vlog.by == nil {
		s.vlog.by = map[uint16]*versionLogEntry{}
	}
	e := s.vlog.by[key]
	if e == nil {
		e = &versionLogEntry{}
		s.vlog.by[key] = e
	} else if now.Sub(e.last) < VersionLogInterval {
		e.suppressed++
		s.vlog.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.last, e.suppressed = now, 0
	s.vlog.mu.Unlock()
	s.log.Warn("refused a request of a wire version this server does not admit (see --min-wire-version)",
		zap.Uint16("wire_version", v), zap.String("admitted_wire_versions", versionList(s.versions)),
		zap.Int("min_wire_version", int(s.o.MinWireVersion)), zap.Int("refusals_not_logged", suppressed))
}

// versionList names versions as a sentence does: "3", "2 and 3",
// "1, 2 and 3".
func versionList(vs []uint16) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(int(v))
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
