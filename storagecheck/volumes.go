package storagecheck

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// checkVolumes compares the access rules of the share of every PersistentVolume of the driver
// with where the workers mount from (answer): the driver gives a share the rules of its class's
// nfs-shareClient once, when it creates it, so volumes made before the answer changed (the
// storage network attached afterwards) may not admit the workers' current addresses. A share
// that cannot be read (gone, or the policy does not allow it) is skipped, with the reason. The
// error is for PersistentVolumes that cannot be listed, or a canceled context.
// One request per share, a few at a time.
func checkVolumes(ctx context.Context, kube kubernetes.Interface, cloud *openstack.Client, answer shareclient.Answer) ([]shareclient.VolumeVerdict, error) {
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes: %v", err)
	}
	var volumes []shareclient.Volume
	shares := map[string]bool{}
	for i := range pvs.Items {
		if v, ok := shareclient.VolumeOf(&pvs.Items[i], operator.DriverName); ok {
			volumes = append(volumes, v)
			if v.ShareID != "" {
				shares[v.ShareID] = true
			}
		}
	}
	if len(volumes) == 0 {
		return nil, nil
	}
	type result struct {
		rules []shareclient.AccessRule
		err   error
	}
	var mu sync.Mutex
	results := map[string]result{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for id := range shares {
		g.Go(func() error {
			rules, err := cloud.AccessRules(gctx, id)
			if openstack.KindOf(err) == openstack.KindCanceled {
				return err
			}
			var r result
			r.err = err
			for _, x := range rules {
				r.rules = append(r.rules, shareclient.AccessRule{ID: x.ID, Type: x.Type, To: x.To, Level: x.Level, State: x.State})
			}
			mu.Lock()
			results[id] = r
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return verdicts(volumes, func(id string) ([]shareclient.AccessRule, error) { r := results[id]; return r.rules, r.err }, answer), nil
}

// verdicts judges each volume against the access rules of its share (rules), sorted by the
// volume's name. A volume whose share's rules cannot be read is skipped, with the reason.
func verdicts(volumes []shareclient.Volume, rules func(shareID string) ([]shareclient.AccessRule, error), answer shareclient.Answer) []shareclient.VolumeVerdict {
	out := make([]shareclient.VolumeVerdict, 0, len(volumes))
	for _, v := range volumes {
		rs, err := rules(v.ShareID)
		if v.ShareID != "" && err != nil {
			out = append(out, shareclient.VolumeVerdict{Volume: v, Skipped: "its share's access rules cannot be read: " + err.Error()})
			continue
		}
		out = append(out, shareclient.CheckVolume(v, rs, answer))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
