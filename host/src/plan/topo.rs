//! Topological order of a stage DAG, or one cycle of it.

/// Stage indices in an order where every producer comes before its consumers (Kahn's
/// algorithm, smallest ready index first, so the order is deterministic), or the stages of
/// one cycle along its edges, from its smallest index, repeated at the end (`[a, b, a]`).
pub(super) fn topological_order(stages: usize, edges: &[(usize, usize)]) -> Result<Vec<usize>, Vec<usize>> {
    let mut indegree = vec![0usize; stages];
    let mut outgoing = vec![Vec::new(); stages];
    for &(p, c) in edges {
        indegree[c] += 1;
        outgoing[p].push(c);
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..stages).filter(|&s| indegree[s] == 0).collect();
    let mut order = Vec::with_capacity(stages);
    while let Some(s) = ready.pop_first() {
        order.push(s);
        for &c in &outgoing[s] {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() == stages {
        Ok(order)
    } else {
        Err(find_cycle(stages, edges, &indegree))
    }
}

/// A cycle among the stages Kahn's algorithm could not order (`indegree > 0`): each of them
/// has a producer among them, so walking producers backwards must repeat a stage.
fn find_cycle(stages: usize, edges: &[(usize, usize)], indegree: &[usize]) -> Vec<usize> {
    let stuck = |s: usize| indegree[s] > 0;
    let producer_of = |c: usize| edges.iter().find(|&&(p, q)| q == c && stuck(p)).map(|&(p, _)| p);
    let mut position = vec![usize::MAX; stages];
    let mut walk = Vec::new();
    let mut at = (0..stages).find(|&s| stuck(s));
    while let Some(s) = at {
        if position[s] != usize::MAX {
            // `walk` holds consumers before producers: the cycle is walk[position[s]..],
            // reversed into edge direction, started at its smallest stage (so the message does
            // not depend on where the walk began) and closed by repeating that stage.
            let mut cycle: Vec<usize> = walk[position[s]..].iter().rev().copied().collect();
            let first = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
            cycle.rotate_left(first);
            cycle.push(cycle[0]);
            return cycle;
        }
        position[s] = walk.len();
        walk.push(s);
        at = producer_of(s);
    }
    Vec::new() // unreachable for a graph Kahn's algorithm could not finish
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_a_diamond_producers_first() {
        let order = topological_order(4, &[(0, 1), (0, 2), (1, 3), (2, 3)]).unwrap();
        assert_eq!(order, vec![0, 1, 2, 3]);
    }

    #[test]
    fn names_the_cycle_in_edge_direction() {
        // 0 -> 1 -> 2 -> 3 -> 1, and 4 stands alone.
        let cycle = topological_order(5, &[(0, 1), (1, 2), (2, 3), (3, 1)]).unwrap_err();
        assert_eq!(cycle, vec![1, 2, 3, 1]);
        let edges = [(0, 1), (1, 2), (2, 3), (3, 1)];
        for w in cycle.windows(2) {
            assert!(edges.contains(&(w[0], w[1])), "{cycle:?} is not along edges");
        }
        assert_eq!(topological_order(1, &[(0, 0)]).unwrap_err(), vec![0, 0]);
    }
}
