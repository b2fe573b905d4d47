package push

// The bounds of a durable reaction record (SPEC §6.9): its type, its key
// (unique within its commit), its payload (plain JSON) and the records one
// commit may plan.
const (
	MaxReactionTypeBytes    = 128
	MaxReactionKeyBytes     = 256
	MaxReactionPayloadBytes = 64 << 10
	MaxReactionPayloadDepth = 16
	MaxReactionsPerCommit   = 100
)

// ReactionType reports whether s is a reaction type SPEC §6.9 accepts: a
// code-like name — a letter, then letters, digits and ". _ - : /" — of at
// most MaxReactionTypeBytes bytes.
func ReactionType(s string) bool {
	if s == "" || len(s) > MaxReactionTypeBytes {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == ':', r == '/':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}
