package wiring

import (
	"go.uber.org/fx"

	"github.com/syncd-dev/syncd/app/config"
	"github.com/syncd-dev/syncd/app/sockets"
)

// SocketsModule provides the node's socket slots.
var SocketsModule = fx.Module("syncd.sockets", fx.Provide(NewSocketSlots))

// NewSocketSlots builds the node's one socket count: the realtime
// channel's and the operation watches' sockets take their slots from it,
// so --realtime-max-sockets and --realtime-max-sockets-per-actor bound
// both kinds together.
func NewSocketSlots(c config.Config) (*sockets.Slots, error) {
	return sockets.New(c.Realtime.MaxSockets, c.Realtime.MaxSocketsPerActor)
}
