//! kube-scheduler's assume cache, one for every kind an attempt reserves
//! (a claim's selected node, a volume's claimRef, a device claim's
//! allocation and consumer): each object as the watch last gave it, with
//! what a reservation assumed over it, and what each pod in its binding
//! cycle reserved, to revert if the cycle fails.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

use super::PodKey;

/// Objects by key, as watched, with the versions reservations assumed
/// over them. A read sees the assumed version first.
#[derive(Debug)]
pub struct Assumed<K, V> {
    watched: HashMap<K, V>,
    assumed: HashMap<K, V>,
}

impl<K, V> Default for Assumed<K, V> {
    fn default() -> Self {
        Assumed { watched: HashMap::new(), assumed: HashMap::new() }
    }
}

impl<K: Hash + Eq, V> Assumed<K, V> {
    /// The object as the last reservation left it, or as watched.
    pub fn get<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.assumed.get(key).or_else(|| self.watched.get(key))
    }

    /// The object as watched, whatever was assumed over it.
    pub fn get_watched<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.watched.get(key)
    }

    /// A newer version from the watch: it replaces any assumption about
    /// the object (usually the watch brings our own write back).
    pub fn watched(&mut self, key: K, value: V) {
        self.assumed.remove(&key);
        self.watched.insert(key, value);
    }

    /// A newer version from the watch that leaves the assumption over it
    /// standing (a write of the binding cycle came back before the one the
    /// assumption stands for).
    pub fn watched_under_assumption(&mut self, key: K, value: V) {
        self.watched.insert(key, value);
    }

    /// The object is gone; returns it as it was watched.
    pub fn deleted<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.assumed.remove(key);
        self.watched.remove(key)
    }

    /// `value` is what a reservation made of the object.
    pub fn assume(&mut self, key: K, value: V) {
        self.assumed.insert(key, value);
    }

    /// The object reads as watched again (a reservation reverted).
    pub fn forget<Q: Hash + Eq + ?Sized>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
    {
        self.assumed.remove(key);
    }

    /// The keys of every object watched.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.watched.keys()
    }
}

/// What each pod in its binding cycle reserved, until the binding is done
/// (the watch brings its writes) or reverted.
#[derive(Debug)]
pub struct Reservations<R> {
    by_pod: HashMap<PodKey, R>,
}

impl<R> Default for Reservations<R> {
    fn default() -> Self {
        Reservations { by_pod: HashMap::new() }
    }
}

impl<R> Reservations<R> {
    pub fn hold(&mut self, pod: &PodKey, reservation: R) {
        self.by_pod.insert(pod.clone(), reservation);
    }

    /// What `pod` holds reserved while its binding cycle runs.
    pub fn get(&self, pod: &PodKey) -> Option<&R> {
        self.by_pod.get(pod)
    }

    /// The pod's binding cycle ended: what it reserved, to revert if it
    /// failed.
    pub fn take(&mut self, pod: &PodKey) -> Option<R> {
        self.by_pod.remove(pod)
    }

    /// Every reservation held.
    pub fn iter(&self) -> impl Iterator<Item = &R> {
        self.by_pod.values()
    }
}
