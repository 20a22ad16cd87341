"""Files rendered for a hybrid site: the Slurm bundle, cloud nodes that join the site's controller, EKS Hybrid Nodes."""
