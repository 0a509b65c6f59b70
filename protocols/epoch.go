package protocols

import "fmt"

// The fencing-epoch scheme of the protocols that are not partition-safe
// (bully, ring): an epoch's low EpochIDBits bits name the leader that
// created it and the bits above count rounds. Two leaders elected on two
// sides of a partition therefore never share an epoch, and a resource that
// keeps the highest epoch it has seen accepts only one of them.

// EpochIDBits is how many low bits of a bully or ring epoch name its leader.
const EpochIDBits = 20

// MaxEpochID is the largest node id whose epochs this scheme can tell
// apart; bully, ring and the agent's configuration refuse larger ids.
const MaxEpochID ID = 1<<EpochIDBits - 1

// NextEpoch returns the epoch a node with this id creates when it becomes
// leader after having seen epochs up to seen: the round bits of seen plus
// one, with id in the low bits. It is strictly greater than seen, and two
// different leaders never produce the same value because their low bits
// differ, even when a partition lets both sides elect from the same seen.
func NextEpoch(seen uint64, id ID) uint64 {
	return ((seen>>EpochIDBits)+1)<<EpochIDBits | uint64(id)
}

// EpochLeader returns the id of the leader that created epoch e.
func EpochLeader(e uint64) ID {
	return ID(e & uint64(MaxEpochID))
}

// CheckEpochIDs reports every id that this epoch scheme cannot carry — this
// node's or a member's zero or above MaxEpochID — and every member id listed
// twice. Bully and ring validate their configuration with it.
func CheckEpochIDs(self ID, members []Member) []error {
	var errs []error
	if self == None || self > MaxEpochID {
		errs = append(errs, fmt.Errorf("id %d must be between 1 and %d", self, MaxEpochID))
	}
	seen := make(map[ID]bool, len(members))
	for _, m := range members {
		if m.ID == None || m.ID > MaxEpochID {
			errs = append(errs, fmt.Errorf("member %q: id %d must be between 1 and %d", m.Name, m.ID, MaxEpochID))
		}
		if seen[m.ID] {
			errs = append(errs, fmt.Errorf("member id %d appears twice", m.ID))
		}
		seen[m.ID] = true
	}
	return errs
}
