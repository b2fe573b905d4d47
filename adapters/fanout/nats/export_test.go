package nats

// SetOnMessage runs hook before each delivery of f's subscription; set it
// before Start.
func SetOnMessage(f *Fanout, hook func()) { f.onMessage = hook }

// Dropped is how many messages f's current subscription dropped.
func Dropped(f *Fanout) int {
	sub := f.sub.Load()
	if sub == nil {
		return 0
	}
	n, _ := sub.Dropped()
	return n
}
