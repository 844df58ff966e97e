package openstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// shareList is a page of Manila's shares/detail answer at microversion 2.73 with n shares,
// every field a real answer has; every tenth share's rules are in error.
func shareList(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"shares":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		rules := "active"
		if i%10 == 0 {
			rules = "error"
		}
		fmt.Fprintf(&b, `{"id":"%08d-1f7c-4c6e-9d7e-3b8a2c9e1f%02d","size":1,"availability_zone":"nova","created_at":"2026-11-28T10:00:00.000000",`+
			`"status":"available","name":"pvc-%08d-5e1a-4b0c-8f6e-2d9c7a1b3e4f","description":null,"project_id":"7f2a9c1b3e4d5f6a7b8c9d0e1f2a3b4c",`+
			`"snapshot_id":null,"share_network_id":null,"share_proto":"NFS","metadata":{"manila.csi.openstack.org/cluster":"ostest-abcde"},`+
			`"share_type":"5c2d8e1f-3a4b-4c6d-8e9f-0a1b2c3d4e5f","share_type_name":"default","volume_type":"default","is_public":false,`+
			`"links":[{"href":"http://manila.example:8786/v2/shares/x","rel":"self"},{"href":"http://manila.example:8786/shares/x","rel":"bookmark"}],`+
			`"snapshot_support":true,"task_state":null,"share_group_id":null,"source_share_group_snapshot_member_id":null,`+
			`"replication_type":null,"has_replicas":false,"user_id":"0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d","create_share_from_snapshot_support":false,`+
			`"revert_to_snapshot_support":false,"share_server_id":null,"host":"manila@dummy#pool","access_rules_status":"%s",`+
			`"mount_snapshot_support":false,"is_soft_deleted":false,"scheduled_to_be_deleted_at":null,"progress":"100%%","export_location":null,"export_locations":[]}`,
			i, i%100, i, rules)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

func TestShareRulesReadsTwoFields(t *testing.T) {
	var got struct {
		Shares []wireShareRules `json:"shares"`
	}
	if err := json.Unmarshal(shareList(20), &got); err != nil {
		t.Fatal(err)
	}
	errs := 0
	for _, s := range got.Shares {
		if s.ID == "" {
			t.Fatalf("a share without ID: %+v", s)
		}
		if s.AccessRulesStatus == "error" {
			errs++
		}
	}
	if len(got.Shares) != 20 || errs != 2 {
		t.Fatalf("%d shares, %d in error, want 20 and 2", len(got.Shares), errs)
	}
}

// BenchmarkShareRulesList decodes a page of 1000 shares as the operator reads it at every
// resync for their access rules (two fields), and, for comparison, with every field the CLI's
// share listing keeps.
func BenchmarkShareRulesList(b *testing.B) {
	body := shareList(1000)
	b.ReportMetric(float64(len(body)), "bytes/page")
	b.Run("rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got struct {
				Shares []wireShareRules `json:"shares"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var got struct {
				Shares []wireShare `json:"shares"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
