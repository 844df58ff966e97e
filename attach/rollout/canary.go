package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The canary: the first new Machine of a set is checked before any old Machine of that set is
// removed. A new Machine that is Running with a Ready Node can still be wrong in ways that only
// show on a booted machine with the storage NIC (docs/day2.md, "What the storage network does to
// a node"): its node IP taken from the storage subnet, no address on the storage network, a
// port Neutron refused. Patching a template is cheap to undo; replacing every machine with a bad
// one is not.

// CanaryAnnotation on a new Machine records its canary check: CanaryPassed, or
// CanaryFailedPrefix followed by what was wrong. A rollout that is run again reads it, so a
// check is made once per Machine and a failed one keeps the rollout stopped until the user has
// fixed the cause (--resume checks the Machine again; deleting it makes a new one to check).
const CanaryAnnotation = "manila-setup.io/canary"

// Values of CanaryAnnotation.
const (
	CanaryPassed       = "passed"
	CanaryFailedPrefix = "failed: "
)

// Facts are what a Target reads about a new Machine for its canary check.
type Facts struct {
	// Set and Machine name the set and the Machine; Node its Node.
	Set, Machine, Node string
	// ServerID is the cloud's ID of the machine's server (from its providerID), if known.
	ServerID string
	// MachineAddresses are the Machine's internal addresses: every fixed IP of its server.
	MachineAddresses []netip.Addr
	// NodeIP is the Node's first InternalIP: the address the kubelet registered with, the one
	// logs, exec and the node's br-ex use.
	NodeIP netip.Addr
	// NodeElsewhere, when set, says why the Node is not read: it lives in another cluster (a
	// Cluster API workload cluster's), whose networks are not this cluster's either.
	NodeElsewhere string
	// StorageNetworks are the Neutron IDs of the storage networks attached to the set (its
	// attachment record).
	StorageNetworks []string
	// RemovedNetworks are the networks taken off the set (patch --remove) that its old
	// Machines still have: the new Machine must have no port on them.
	RemovedNetworks []string
	// Warnings are the Warning events about the Machine (a port Neutron refused, a failed
	// create), as "Reason: message".
	Warnings []string
}

// Verdict is a canary check's answer: Problems empty means the Machine passed. Checked says
// what was checked, for the progress line and the record.
type Verdict struct {
	Checked  []string
	Problems []string
}

// Checker checks a new Machine before the rollout goes on. An error means the check could not
// be made (the cloud did not answer): the rollout stops without judging the Machine.
type Checker interface {
	Check(ctx context.Context, f Facts) (Verdict, error)
}

// canaryGuidance is how to go on after a canary failed: fix, then either a new Machine or a
// second look at this one.
func canaryGuidance(api API, machine string) string {
	return fmt.Sprintf(" Fix the cause, then either delete Machine %s (`oc delete %s -n %s %s`) so that its set makes a new one with the fix (a subnet's gateway, DNS or routes reach a machine only when it boots), and run `%s` again; or, when the fix applies to running machines (a security group rule, an address pair), run `%s --resume` to check %s again. `--no-canary` skips the check.",
		machine, api.MachineResource, api.Namespace, machine, api.Command, api.Command, machine)
}

// failedCanary returns the value of CanaryAnnotation for problems.
func failedCanary(problems []string) string {
	return CanaryFailedPrefix + strings.Join(problems, "; ")
}

// CanaryPatch is the merge patch that sets a Machine's CanaryAnnotation to value ("" removes it).
func CanaryPatch(value string) []byte {
	var v any = value
	if value == "" {
		v = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{CanaryAnnotation: v}}})
	return b
}

// InternalIPs are the InternalIP addresses of a Machine's or a Node's status, in order: a
// Node's first is its node IP.
func InternalIPs(addresses []corev1.NodeAddress) []netip.Addr {
	var out []netip.Addr
	for _, a := range addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

// ServerID is the server's ID in a providerID ("openstack:///<id>", or with a region
// "openstack://<region>/<id>").
func ServerID(providerID string) string {
	rest, ok := strings.CutPrefix(providerID, "openstack://")
	if !ok {
		return ""
	}
	return rest[strings.LastIndex(rest, "/")+1:]
}

// NewestWarning is the newest of a Machine's Warning events as "Reason: message", and how many
// Warning events of that reason there are (an event's count included: the recorder folds
// repeats of one message into one event).
func NewestWarning(events []corev1.Event) (string, int) {
	var newest *corev1.Event
	for i := range events {
		if newest == nil || eventTime(&events[i]).After(eventTime(newest)) {
			newest = &events[i]
		}
	}
	if newest == nil {
		return "", 0
	}
	n := 0
	for _, e := range events {
		if e.Reason == newest.Reason {
			n += max(int(e.Count), 1)
		}
	}
	return newest.Reason + ": " + newest.Message, n
}

// eventTime is when an event last happened, by whichever of its times the recorder set.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}
