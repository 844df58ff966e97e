package main

import "github.com/spf13/cobra"

func newInstallConfigCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return groupCommand("installconfig", "Check and patch an install-config.yaml before installing",
		`Check and patch the OpenStack part of an install-config.yaml before "openshift-install create
cluster": the additionalNetworkIDs and additionalSecurityGroupIDs of the compute pools, the
control plane and platform.openstack.defaultMachinePlatform.

Every mistake is reported with its field path, so a wrong ID is caught in milliseconds instead
of after a long install.`)
}

func newMachineSetsCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return groupCommand("machinesets", "Attach the storage network to the MachineSets of a running cluster",
		`Attach the Manila storage network and its security groups to the OpenstackProviderSpec of the
MachineSets in openshift-machine-api, and replace the machines so that the running nodes get
the new network port without dropping below capacity.`)
}

func newNetworksCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return groupCommand("networks", "Find the network Manila exports on, and attach workers to it",
		`Work with the OpenStack networks of the cloud in clouds.yaml (--os-cloud): find the network on
which Manila exports its shares and whether the cluster's workers are attached to it.`)
}

func newOperatorCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return groupCommand("operator", "Run, render or inspect the in-cluster Manila CSI driver operator",
		`The in-cluster operator detects Manila in the Keystone catalog, deploys the Manila CSI driver
and its NFS partner node plugin, keeps one StorageClass per Manila share type and reports its
state on the ClusterCSIDriver manila.csi.openstack.org.`)
}
