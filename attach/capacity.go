package attach

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// The capacity of the storage network: every machine the attachment reaches takes one address
// of its subnet, and a machine whose port Neutron cannot give one ("No more IP addresses
// available on network ...") never starts. The machines to attach are counted before anything
// is written and compared with the free addresses Neutron counts (allocation pools minus the
// ports on the subnet).

// NetworkCapacity is what one network's subnets can still give the machines' ports.
type NetworkCapacity struct {
	// Network is the network's ID; Label names it ("name (ID)").
	Network string
	Label   string
	// Subnets are the subnets a machine's port takes an address from (Counted), with their counts.
	Subnets []openstack.SubnetCapacity
}

// Counted are the subnets a machine's port takes its address from: Neutron gives a port one
// address of one IPv4 subnet (trying the next when one is full), so the IPv4 subnets count;
// a network with none counts its IPv6 subnets.
func (n NetworkCapacity) Counted() []openstack.SubnetCapacity {
	v4 := slices.DeleteFunc(slices.Clone(n.Subnets), func(s openstack.SubnetCapacity) bool { return s.Subnet.IPVersion != 4 })
	if len(v4) > 0 {
		return v4
	}
	return n.Subnets
}

// Free is the number of addresses the counted subnets have left.
func (n NetworkCapacity) Free() int64 {
	var free int64
	for _, s := range n.Counted() {
		free = min(free+s.Free, openstack.MaxCount)
	}
	return free
}

// subnetsText names the counted subnets with their pools and counts.
func (n NetworkCapacity) subnetsText() string {
	parts := make([]string, 0, len(n.Subnets))
	for _, s := range n.Counted() {
		pools := make([]string, len(s.Pools))
		for i, p := range s.Pools {
			pools[i] = p.First.String() + "-" + p.Last.String()
		}
		pool := "no allocation pool"
		if len(pools) > 0 {
			pool = "allocation pool " + strings.Join(pools, ", ")
		}
		parts = append(parts, fmt.Sprintf("subnet %s (%s: %d addresses, %d in use, %d free)", s.Ref(), pool, s.Size, s.Used, s.Free))
	}
	if len(parts) == 0 {
		return "no subnet"
	}
	return strings.Join(parts, "; ")
}

// CapacityOf asks Neutron for the free addresses of each network of ids.
func CapacityOf(ctx context.Context, cloud *openstack.Client, ids []string) ([]NetworkCapacity, error) {
	nets, err := cloud.Networks(ctx, ids...)
	if err != nil {
		return nil, &CloudError{Err: err}
	}
	var out []NetworkCapacity
	for _, id := range ids {
		at := slices.IndexFunc(nets, func(n openstack.Network) bool { return neutronid.Equal(n.ID, id) })
		if at < 0 {
			continue // an unknown ID is the ID check's to name
		}
		subnets, err := cloud.NetworkCapacity(ctx, nets[at].ID)
		if err != nil {
			return nil, &CloudError{Err: err}
		}
		out = append(out, NetworkCapacity{Network: nets[at].ID, Label: nets[at].Ref(), Subnets: subnets})
	}
	return out, nil
}

// Demand is one object whose machines the attachment reaches: its ref and replica count.
type Demand struct {
	Ref      Ref
	Replicas int
}

// Counter is a Target whose objects make machines: Replicas is how many an object has (its
// spec's replica count). Patch counts the machines to attach through it.
type Counter[O any] interface {
	Replicas(o O) int
}

// CapacityCheck compares the machines an attachment reaches with the free addresses of the
// networks it attaches. One check is shared by every kind a command patches (workers.Cluster),
// so the machines of every kind are counted against the same addresses.
type CapacityCheck struct {
	Networks []NetworkCapacity
	// Surge is how many machines a rollout adds above the replica count at once, each with a
	// port of its own while the machine it replaces keeps its own.
	Surge int
	// Force writes anyway; Warn then hears what would have been refused.
	Force bool
	Warn  func(*CapacityError)

	mu    sync.Mutex
	taken map[string][]Demand // by network ID (neutronid.Key)
}

// Clone is a check of the same networks and options that has counted nothing yet and warns
// nobody: for a dry pass before the real one.
func (c *CapacityCheck) Clone() *CapacityCheck {
	if c == nil {
		return nil
	}
	return &CapacityCheck{Networks: c.Networks, Surge: c.Surge, Force: c.Force}
}

// CapacityError refuses an attachment whose machines outnumber the free addresses of a
// network; nothing is written.
type CapacityError struct {
	Network NetworkCapacity
	// Demand are the objects whose machines get the network, Surge the rollout's extra
	// machines; Needed their sum and Free the addresses left.
	Demand []Demand
	Surge  int
	Needed int64
	Free   int64
}

func (e *CapacityError) Error() string {
	objs := make([]string, len(e.Demand))
	for i, d := range e.Demand {
		objs[i] = fmt.Sprintf("%s %s (%d)", d.Ref.Kind, d.Ref.Name, d.Replicas)
	}
	machines := e.Needed - int64(e.Surge)
	surge := ""
	if e.Surge > 0 {
		surge = fmt.Sprintf(" plus %d more while their rollout surges", e.Surge)
	}
	return fmt.Sprintf("the storage network %s has %d free addresses, but %d are needed: %d machines get a port on it (%s)%s; %d machines would get no address and never start (Neutron: \"No more IP addresses available on network\"). "+
		"Its %s. Fix: enlarge the allocation pool (openstack subnet set --allocation-pool start=FIRST,end=LAST SUBNET), or attach a network or subnet with room for them",
		e.Network.Label, e.Free, e.Needed, machines, strings.Join(objs, ", "), surge, e.Needed-e.Free, e.Network.subnetsText())
}

// take counts the demand of each network (by ID) against the network's free addresses, with
// the machines taken before (by other kinds of the same command): refused (*CapacityError) when
// they and the rollout's surge outnumber them, unless Force, which warns and takes them all the
// same. A refused demand is not taken. Networks the check does not know are not counted.
func (c *CapacityCheck) take(demand map[string][]Demand) error {
	if c == nil || len(demand) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string][]Demand{}
	for _, n := range c.Networks {
		key := neutronid.Key(n.Network)
		more := demand[key]
		if len(more) == 0 {
			continue
		}
		all := slices.Concat(c.taken[key], more)
		needed := int64(c.Surge)
		for _, d := range all {
			needed += int64(d.Replicas)
		}
		next[key] = all
		if free := n.Free(); needed > free {
			err := &CapacityError{Network: n, Demand: all, Surge: c.Surge, Needed: needed, Free: free}
			if !c.Force {
				return err
			}
			if c.Warn != nil {
				c.Warn(err)
			}
		}
	}
	if c.taken == nil {
		c.taken = map[string][]Demand{}
	}
	for k, v := range next {
		c.taken[k] = v
	}
	return nil
}

// checkCapacity plans every object Patch selected and takes the machines of those whose plan
// adds a network of the check, before anything is written.
func checkCapacity[O any](ctx context.Context, target Target[O], objects []Selected[O], opts Options) error {
	counter, ok := target.(Counter[O])
	if opts.Capacity == nil || opts.Remove != nil || !ok {
		return nil
	}
	demand := map[string][]Demand{}
	for _, s := range objects {
		if s.Skip != "" {
			continue
		}
		plan, err := planOf(ctx, target, s.Object, opts)
		if err != nil {
			return err
		}
		if plan.Result.Action != ActionPatched || len(plan.Result.AddedNetworks) == 0 {
			continue
		}
		if n := counter.Replicas(s.Object); n > 0 {
			for _, id := range plan.Result.AddedNetworks {
				key := neutronid.Key(id)
				demand[key] = append(demand[key], Demand{Ref: target.Ref(s.Object), Replicas: n})
			}
		}
	}
	return opts.Capacity.take(demand)
}
