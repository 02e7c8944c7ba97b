//! Random placement of blocks on parameter-server nodes (SCAR §4.1: "the
//! parameters are partitioned uniformly at random across the PS nodes").
//!
//! Choice (the paper is silent): a random *balanced* partition. The blocks
//! are shuffled and dealt to the nodes in turn, so every node holds ⌊n/m⌋ or
//! ⌈n/m⌉ blocks, as a PS that partitions by a random hash of the key would.

use rand::seq::SliceRandom;

use crate::rng::SimRng;

/// Which PS node holds each block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    node_of: Vec<u32>,
    nodes: usize,
}

impl Placement {
    /// A random balanced placement of `blocks` blocks on `nodes` nodes.
    pub(crate) fn random(blocks: usize, nodes: usize, rng: &mut SimRng) -> Placement {
        assert!(nodes >= 1, "at least one PS node");
        let mut order: Vec<usize> = (0..blocks).collect();
        order.shuffle(rng);
        let mut node_of = vec![0u32; blocks];
        for (i, b) in order.into_iter().enumerate() {
            node_of[b] = (i % nodes) as u32;
        }
        Placement { node_of, nodes }
    }

    /// Number of PS nodes.
    pub(crate) fn nodes(&self) -> usize {
        self.nodes
    }

    /// The node holding `block`.
    pub(crate) fn node_of(&self, block: usize) -> usize {
        self.node_of[block] as usize
    }

    /// The blocks held by any of `nodes`, in increasing block order.
    pub(crate) fn blocks_on(&self, nodes: &[usize]) -> Vec<usize> {
        let mut hit = vec![false; self.nodes];
        for &n in nodes {
            hit[n] = true;
        }
        (0..self.node_of.len())
            .filter(|&b| hit[self.node_of[b] as usize])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, stream};

    #[test]
    fn balanced_and_complete() {
        let mut rng = stream(1, Purpose::Placement, 0, 0);
        let p = Placement::random(10, 3, &mut rng);
        let mut counts = [0; 3];
        (0..10).for_each(|b| counts[p.node_of(b)] += 1);
        counts.sort();
        assert_eq!(counts, [3, 3, 4]);
        let all = p.blocks_on(&[0, 1, 2]);
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }
}
