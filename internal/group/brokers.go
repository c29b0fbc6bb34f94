package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hooks hands the group's errors and the start of its rebalances to the
// member.
type hooks struct {
	manage  func(error)
	joining func() // a JoinGroup request was written: a rebalance starts or goes on
}

// OnBrokerWrite implements kgo.HookBrokerWrite: it notes the member's
// JoinGroup requests, which start its part in a rebalance.
func (h *hooks) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key == int16(kmsg.JoinGroup) && h.joining != nil {
		h.joining()
	}
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (h *hooks) OnGroupManageError(err error) {
	if h.manage != nil {
		h.manage(err)
	}
}
