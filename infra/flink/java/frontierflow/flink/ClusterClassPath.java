package frontierflow.flink;

import java.io.File;
import java.net.URISyntaxException;
import java.util.List;
import org.apache.beam.sdk.util.construction.resources.PipelineResourcesDetector;

/**
 * The job server's class path is already on the session cluster's own class path
 * ({@code infra/flink/cluster.sh} puts it there), so a job stages no jars.
 *
 * <p>Beam's Flink job server otherwise ships its whole class path (~240 MB) with every job:
 * the submission uploads it to the JobManager's blob server and each TaskManager downloads
 * it again and loads its classes in a fresh class loader. Chosen per pipeline with
 * {@code --pipeline_resources_detector_factory_class=frontierflow.flink.ClusterClassPath}.
 */
public final class ClusterClassPath implements PipelineResourcesDetector.Factory {

  /** Beam builds the factory through this method (its {@code InstanceBuilder}). */
  public static ClusterClassPath create() {
    return new ClusterClassPath();
  }

  @Override
  public PipelineResourcesDetector getPipelineResourcesDetector() {
    return new StageThisJar();
  }

  /** Detects one resource to stage: the jar this class was loaded from. */
  static final class StageThisJar implements PipelineResourcesDetector {
    private static final long serialVersionUID = 1L;

    @Override
    public List<String> detect(ClassLoader classLoader) {
      try {
        File jar = new File(ClusterClassPath.class.getProtectionDomain().getCodeSource()
            .getLocation().toURI());
        return List.of(jar.getAbsolutePath());
      } catch (URISyntaxException | NullPointerException e) {
        throw new IllegalStateException("cannot tell the jar of " + ClusterClassPath.class, e);
      }
    }
  }
}
