"""The images a stack bakes for its nodes: EC2 Image Builder components, recipes, a build infrastructure
and the images whose AMIs the Slurm compute launch templates name."""
