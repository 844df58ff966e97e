package openstack

import "testing"

func TestQuotaUseShort(t *testing.T) {
	for _, c := range []struct {
		q    QuotaUse
		want bool
	}{
		{QuotaUse{Limit: -1, InUse: 500, Needs: 8}, false},            // no limit
		{QuotaUse{Limit: 20, InUse: 12, Needs: 8}, false},             // exactly fits
		{QuotaUse{Limit: 20, InUse: 12, Reserved: 1, Needs: 8}, true}, // reservations count
		{QuotaUse{Limit: 0, Needs: 1}, true},
	} {
		if got := c.q.Short(); got != c.want {
			t.Errorf("%+v: Short = %v, want %v", c.q, got, c.want)
		}
	}
}
