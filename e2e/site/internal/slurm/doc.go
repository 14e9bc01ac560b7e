// Package slurm runs the Slurm client commands the node needs, against one slurm.conf:
// sbatch as the site's HPC account, and scontrol and scancel as the node, and reads their
// answers. It keeps no state: the node decides what to ask and when.
package slurm
